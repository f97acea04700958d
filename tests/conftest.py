"""Shared fixtures for every layer: one torch thread, a folder of small checkpoints, Runs and Views over it.

Nothing here needs a server or an HTTP client; the app and the browser are tests/e2e/conftest.py's.
"""

from __future__ import annotations

from pathlib import Path

import os

import pytest
import torch

from attention_viz.data.checkpoints import save_checkpoint
from attention_viz.core.config import TransformerConfig
from attention_viz.core.model import Transformer
from attention_viz.data.tasks import ALPHABET
from attention_viz.data.tokenizer import VOCAB_SIZE

ROOT = Path(__file__).resolve().parent.parent

# A family of tiny checkpoints (random weights, honest cards) for tests that need "trained" models
# without depending on what attention_viz/data/models ships: reverse at d_k 4, 16, 64 with 1/√d_k, and copy without it.
FAKE_FAMILY = [("reverse", "sqrt_dk", 4), ("reverse", "sqrt_dk", 16), ("reverse", "sqrt_dk", 64), ("copy", "none", 16)]


@pytest.fixture(scope="session")
def one_thread():
    """One torch thread, as the server runs: on 2 shared cores, 2 threads can be 100x slower for these sizes."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory) -> Path:
    """A checkpoint folder with FAKE_FAMILY: the cards say what a trained model's card says."""
    folder = tmp_path_factory.mktemp("models")
    for seed, (task, scale, d_k) in enumerate(FAKE_FAMILY):
        config = TransformerConfig(vocab_size=VOCAB_SIZE, n_encoder_layers=2, n_decoder_layers=2, d_model=16,
                                   n_heads=2, d_k=d_k, d_v=8, d_ff=32, dropout=0.0)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = Transformer(config).eval()
        card = {"task": task, "scale": scale, "alphabet": ALPHABET, "max_len": 24, "heldout_exact_match": 0.5}
        save_checkpoint(model, card, folder / f"{task}_dk{d_k}_{scale}")
    return folder


@pytest.fixture(scope="session")
def runs(models_dir, one_thread):
    from attention_viz.service.runs import Runs

    return Runs(models_dir)


@pytest.fixture(scope="session")
def views(runs):
    from attention_viz.service.views import Views

    return Views(runs)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """pytest-playwright drives Debian's Chromium (devtools.browser), for tests/e2e and tests/explorer alike."""
    from devtools.browser import CHROMIUM, CHROMIUM_ARGS

    if not CHROMIUM.exists():
        if os.environ.get("ATTENTION_VIZ_REQUIRE_BROWSER"):  # set by .ci/run: CI never skips the browser tests
            pytest.fail(f"{CHROMIUM} is missing, and the browser tests must run here")
        pytest.skip(f"{CHROMIUM} is missing (`bash .ci/run` installs it)")
    return {**browser_type_launch_args, "executable_path": str(CHROMIUM), "headless": True, "args": CHROMIUM_ARGS}


@pytest.fixture(scope="session")
def minilm_folder() -> Path:
    """The trained all-MiniLM-L6-v2 folder (devtools.trained_models), extracted once per machine; skipped only
    where its package is absent and ATTENTION_VIZ_REQUIRE_BROWSER is unset (CI sets it: it fails instead)."""
    from devtools.trained_models import TrainedModelMissing, minilm_folder

    try:
        return minilm_folder()
    except TrainedModelMissing as error:
        if os.environ.get("ATTENTION_VIZ_REQUIRE_BROWSER"):  # set by .ci/run: CI never skips the trained model
            pytest.fail(f"the trained model must be tested here: {error}")
        pytest.skip(f"no trained real model: {error}")


# ----------------------------------------------------------------------------- sorting by cost: unit, integration, e2e
# Every collected test gets exactly one of three markers (pyproject.toml registers them; docs/testing.md):
#   unit         fast: no model files, no server, no browser, each test well under a second on an idle machine
#                (`python3 -m pytest -m unit -q` runs them all in under a minute on 2 cores);
#   integration  the shipped and real-format models, the wheel, and the costliest checks;
#   e2e          the launched app (`python app.py`) and Chromium.
# A test's own marker (a decorator or a module's pytestmark) wins; otherwise the costliest rule that applies below,
# and the folder's default where none does, so a new test is never left unmarked (tests/test_markers.py checks).
COST_MARKERS = ("unit", "integration", "e2e")
FOLDER_DEFAULTS = {"e2e": "e2e", "hub": "integration"}  # tests/<folder>/...; any other folder (or none): unit
# Fixtures that start the app or drive Chromium (browser_type_launch_args is under every Playwright fixture: page,
# context, browser), and fixtures that build or load real-format or shipped models.
E2E_FIXTURES = {"app_url", "browser_type_launch_args"}
INTEGRATION_FIXTURES = {"tiny_folder", "tiny_folders", "minilm_folder", "shipped_model", "shipped_payload",
                        "shipped_views", "real_views"}
# Modules that build real-format models themselves (small transformers models saved offline).
INTEGRATION_IMPORTS = {"devtools.hub_models", "devtools.trained_models"}
# Measured once (`python3 -m pytest -q -p no:cacheprovider --durations=0 tests/<folder>`, folder by folder, on the
# shared 2-core machine, 26 November 2026): the tests outside tests/hub and tests/e2e whose cases together took 2 s
# or more there, each over 20 times a typical unit test (most take under 0.1 s). Node ids (from the repository root)
# without parameters; a renamed test must be renamed here too (tests/test_markers.py fails until it is).
SLOW_TESTS = {
    "tests/train/test_study.py::test_a_tiny_study_writes_results_and_resumes",  # 31 s: trains a tiny study
    "tests/test_importance.py::test_mean_ablation_importance_equals_a_mean_ablated_run",  # 22 s
    "tests/core/test_attention.py::test_the_fast_kernel_is_bitwise_the_reference",  # 20 s over 80 cases
    "tests/test_deploy.py::test_a_real_model_loads_offline_from_a_hub_cache_as_the_volume_holds_it",  # 19 s
    "tests/test_importance.py::test_each_heads_drop_and_loss_rise_equal_a_run_with_that_head_alone_off",  # 17 s
    "tests/test_package.py::test_the_readme_python_runs_from_another_folder",  # 13 s: subprocesses
    "tests/core/test_decoding.py::test_reusing_keys_agrees_with_full_passes_when_the_model_emits_pad",  # 12 s
    "tests/test_importance.py::test_the_prune_curve_follows_its_order_and_says_how_many_can_go",  # 11 s
    "tests/test_package.py::test_the_wheel_holds_every_shipped_model_and_every_layer",  # 10 s: pip wheel
    "tests/core/test_masks_and_inputs.py::test_attention_inputs_and_steps_reproduce_every_map_exactly",  # 6 s
    "tests/service/test_heads_off.py::test_a_real_model_runs_with_heads_off_and_mean_ablation",  # 6 s
    "tests/test_lab.py::test_dot_product_law_is_symmetric_with_variance_d_k_and_tends_to_normal",  # 6 s
    "tests/core/test_ablation.py::test_the_gates_gradient_equals_a_finite_difference",  # 2.9 s
    "tests/core/test_interop.py::test_random_configurations_import_exactly",  # 2.7 s
    "tests/core/test_masks_and_inputs.py::test_attention_masks_are_the_masks_forward_applies",  # 2.5 s
    "tests/webui/test_app_handlers.py::test_tune_malloc_gives_large_blocks_their_own_mapping",  # 2.3 s: a subprocess
    "tests/webui/test_app_handlers.py::test_frozen_start_up_objects_let_figures_go_within_a_few_renders",  # 2.2 s
    "tests/draw/test_render.py::test_building_every_figure_leaves_pyplot_unimported",  # 2.2 s: a subprocess
    "tests/core/test_ablation.py::test_mean_ablation_equals_moving_the_heads_mean_into_w_os_bias",  # 2.1 s
    # tests/test_qkstats.py, timed the same way later (load average 10-12 rather than 7: about 1.6x slower)
    "tests/test_qkstats.py::test_a_shipped_models_statistics_equal_the_float64_reference",  # 12 s
    "tests/test_qkstats.py::test_padding_changes_nothing_and_a_repeated_text_changes_no_variance",  # 7.4 s
    "tests/test_qkstats.py::test_odd_sizes_and_an_untrained_model_that_never_ends",  # 5.5 s
    # tests/draw/test_vector.py, timed the same way at load average 8.5 (27 November): three figures laid out and drawn
    "tests/draw/test_vector.py::test_figures_keep_their_labels_inside_the_page",  # 5.3 s
}

# The unit tests that read the shipped models (attention_viz/data/models), found by running `python3 -m pytest -m unit`
# on a copy of the tree with that folder emptied: ids without parameters, or a whole file.
SHIPPED_MODEL_TESTS = {
    "tests/service/test_lesson.py", "tests/service/test_qk_view.py", "tests/service/test_study_families.py",
    "tests/webui/test_study_handlers.py",
    "tests/data/test_checkpoints.py::test_every_shipped_model_still_loads",
    "tests/service/test_dates_model.py::test_a_date_runs_to_its_iso_form_and_is_checked",
    "tests/service/test_dates_model.py::test_a_string_model_on_a_longer_text_says_what_it_was_trained_on",
    "tests/service/test_dates_model.py::test_capitals_run_lower_cased_and_other_characters_are_named",
    "tests/service/test_dates_model.py::test_free_text_runs_on_the_dates_model_without_an_answer",
    "tests/service/test_dates_model.py::test_the_app_takes_texts_as_long_as_its_longest_model_was_trained_on",
    "tests/service/test_dates_model.py::test_the_dates_model_is_in_the_picker_with_a_date_to_type",
    "tests/service/test_inputs.py::test_a_trained_model_runs_capitals_lower_cased_and_says_so",
    "tests/service/test_scores.py::test_shipped_task_models_score_their_alignment",
    "tests/service/test_training_view.py::test_alignment_is_the_weight_on_reverses_anti_diagonal",
    "tests/service/test_training_view.py::test_every_trained_size_packs_the_three_arms_from_their_snapshots",
    "tests/service/test_training_view.py::test_only_trained_sizes_are_accepted",
    "tests/test_importance.py::test_bad_arguments_are_refused",
    "tests/test_importance.py::test_one_of_our_models_needs_its_task",
    "tests/test_importance.py::test_the_gradient_estimate_is_the_mean_of_each_strings_own_gradient",
    "tests/test_package.py::test_the_public_api_is_importable_from_the_top",
    "tests/test_qkstats.py::test_bad_input_is_refused_with_a_message",
    "tests/test_qkstats.py::test_the_scaled_entropy_is_the_maps_entropy_under_1_over_sqrt_dk",
    "tests/webui/test_app_handlers.py::test_the_study_ships_as_numbers_the_page_draws",
    "tests/webui/test_app_handlers.py::test_the_text_box_says_what_the_chosen_model_knows",
}


def listed(item, table: set) -> bool:
    """Whether the table names this test (its id without parameters) or its whole file."""
    test = item.nodeid.split("[")[0]
    return test in table or test.split("::")[0] in table


def cost_marker(item) -> str:
    """unit, integration or e2e for one collected test (its own marker first; see COST_MARKERS above)."""
    own = [name for name in COST_MARKERS if item.get_closest_marker(name)]
    if own:
        return own[-1]  # tests/test_markers.py fails a test that carries more than one
    path = Path(str(item.path)).resolve()
    relative = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.as_posix()
    parts = relative.split("/")
    folder = FOLDER_DEFAULTS.get(parts[1], "unit") if len(parts) > 2 and parts[0] == "tests" else "unit"
    fixtures = set(getattr(item, "fixturenames", ()))
    if folder == "e2e" or fixtures & E2E_FIXTURES or item.get_closest_marker("browser"):
        return "e2e"
    module = getattr(item, "module", None)
    imports = {getattr(value, "__module__", None) for value in vars(module).values()} if module else set()
    if (folder == "integration" or fixtures & INTEGRATION_FIXTURES or imports & INTEGRATION_IMPORTS
            or listed(item, SLOW_TESTS) or listed(item, SHIPPED_MODEL_TESTS)):
        return "integration"
    return "unit"


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        name = cost_marker(item)
        if not item.get_closest_marker(name):
            item.add_marker(name)
