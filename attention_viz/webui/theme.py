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

# A waiting event's place in the queue and its time ("queue: 12/40 | 1.1/4.3s", Gradio's status text) goes at the foot
# of its output, or, for a view without a frame like the lab's and the explorer's, just below its top in a status box
# of no height that clips it. Both views are taller than a screen: their place in the line goes at their top right,
# beside the view's heading, where the student is looking.
TALL_VIEWS = ("lab_view", "explorer_view")
# A refused input: these outputs say so themselves (the notes' "Refused.", each view's note that it shows the last
# accepted input) and the toast gives the message; Gradio's own "Error" badge, centred over each of them, covered
# that very text ("...the messag[Error] change."). Their error status is not drawn; the toast stays.
SAY_REFUSAL = ("output", "info", "explorer_view", "steps_view", "steps_text", "compare_view", "compare_text",
               "heads_view", "lab_view", "lab_numbers",
               # the Pictures and sound tab: a refused file leaves its views as they were, the toast says why
               *(f"media_{name}" for name in ("notes", "overlay", "heads", "rollout", "specials", "alignment",
                                             "encoder", "query", "layer", "head")))
# A checked radio under the pointer: Gradio's hover colour (white) replaced its checked one, and its white dot vanished
# (white on white) while the pointer rested on the choice just clicked, e.g. "custom factor" as its factor is typed.
# The model picker's caret sits over the end of its box: a long name ends before it, with an ellipsis.
# The explorer starts at the top of its tab (it has its own padding): every pixel counts on a 768 px high screen.
# The recording's player writes its times and speed in zinc-300 on white (1.9:1): the softer text's colour instead.
MODEL_PICKER = "model"
# The Pictures and sound tab's figures start below their label and Gradio's buttons, which float over an image's top
# (a phone's narrow figure put its title under them). On a narrow screen the wide figures (every head, the alignment)
# keep their drawn size, their labels readable, and scroll sideways inside their frame.
MEDIA_FIGURES = ("media_overlay", "media_rollout", "media_heads", "media_alignment")
MEDIA_WIDE = ("media_heads", "media_alignment")
# A checked radio or checkbox looks the same focused or not, and a range slider shows nothing: an outline each
# (only for keyboard focus, :focus-visible, so a click draws none).
CSS = f"""
input[type=radio]:focus-visible, input[type=checkbox]:focus-visible, input[type=range]:focus-visible {{
  outline: 2px solid {FOCUS}; outline-offset: 2px;
}}
{", ".join(f"#{view} [data-testid=status-tracker]" for view in TALL_VIEWS)} {{ overflow: visible; }}
{", ".join(f"#{view} [data-testid=status-tracker] .progress-text" for view in TALL_VIEWS)} {{
  top: 0; bottom: auto; right: 0; transform: none;
}}
{", ".join(f"#{view} [data-testid=status-tracker]:has(.error)" for view in SAY_REFUSAL)} {{ display: none; }}
.gradio-container input[type=radio]:checked:hover, .gradio-container input[type=checkbox]:checked:hover {{
  background-color: var(--checkbox-background-color-selected); border-color: var(--checkbox-border-color-selected);
}}
#{MODEL_PICKER} input {{ padding-right: 28px; text-overflow: ellipsis; }}
#explorer_view > .html-container {{ padding-top: 0; }}
{", ".join(f"#{view} .image-container" for view in MEDIA_FIGURES)} {{ padding-top: 32px; }}
@media (max-width: 720px) {{
  {", ".join(f"#{view} .image-container" for view in MEDIA_WIDE)} {{ overflow-x: auto; }}
  {", ".join(f"#{view} img" for view in MEDIA_WIDE)} {{ max-width: none; width: auto; }}
  {", ".join(f"#{view} .image-container > button" for view in MEDIA_WIDE)} {{ justify-content: safe center; }}
}}
.gradio-container .timestamps #time, .gradio-container .timestamps #duration, .gradio-container .playback > span {{
  color: var(--body-text-color-subdued);
}}
"""
