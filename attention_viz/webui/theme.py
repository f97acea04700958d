"""The page's look where Gradio's default theme falls short of WCAG 2.1 AA (docs/accessibility.md).

Gradio's default writes its softer text (slider limits, info lines, the footer, the lab's notes through
--body-text-color-subdued) in zinc-400 on white, 1.9:1, and white on its orange primary buttons, 2.8:1; it shows
no focus on a range slider and none on a checked radio. Here: softer text in zinc-600 (7.7:1), primary buttons
orange-700 (5.2:1, hover orange-800), and one focus ring on every control that lacked one.

    demo.launch(theme=THEME, css=CSS, ...)
"""

from __future__ import annotations

import gradio as gr

FOCUS = "#1f4e99"  # the focus ring: 8.6:1 on white, and unlike the orange of a checked control

THEME = gr.themes.Default().set(
    body_text_color_subdued="*neutral_600",
    button_primary_background_fill="*primary_700",
    button_primary_background_fill_dark="*primary_700",
    button_primary_background_fill_hover="*primary_800",
    button_primary_background_fill_hover_dark="*primary_800",
)

# A checked radio or checkbox looks the same focused or not, and a range slider shows nothing: an outline each
# (only for keyboard focus, :focus-visible, so a click draws none).
CSS = f"""
input[type=radio]:focus-visible, input[type=checkbox]:focus-visible, input[type=range]:focus-visible {{
  outline: 2px solid {FOCUS}; outline-offset: 2px;
}}
"""
