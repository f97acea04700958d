"""The container image and the Kubernetes manifests, read as files (no image is built, no cluster is needed):
the Dockerfile installs the CPU torch it pins, copies what app.py needs, runs it as a non-root user on 0.0.0.0:7860
and probes the app's own readiness endpoint; the manifests agree with each other and with the image; a Hub cache
laid out as the Hub writes it serves a real model offline, as the mounted volume does."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from attention_viz.server.liveness import HEALTH_PATH

ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = ROOT / "deploy" / "kubernetes"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile: comments dropped, continued lines joined."""
    joined, parts = [], []
    for line in path.read_text().splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        parts.append(line.rstrip().removesuffix("\\").strip())
        if not line.rstrip().endswith("\\"):
            joined.append(" ".join(parts))
            parts = []
    return [(text.split(None, 1)[0].upper(), text.split(None, 1)[1] if " " in text else "") for text in joined]


DOCKERFILE = instructions(ROOT / "Dockerfile")


def args(name: str) -> list[str]:
    return [a for n, a in DOCKERFILE if n == name]


def env() -> dict[str, str]:
    pairs = {}
    for line in args("ENV"):
        pairs |= dict(re.findall(r"(\w+)=(\S+)", line))
    return pairs


def pinned_torch() -> str:
    return next(line.split("==")[1].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()
                if line.startswith("torch=="))


def test_the_image_installs_the_pinned_torch_from_the_cpu_index_before_anything_pulls_one():
    runs = args("RUN")
    torch = [i for i, r in enumerate(runs) if re.search(r"\btorch==", r)]
    assert len(torch) == 1, runs
    line = runs[torch[0]]
    assert f"torch=={pinned_torch()}" in line.split() and f"--index-url {CPU_INDEX}" in line, line
    requirements = next(i for i, r in enumerate(runs) if "-r requirements.txt" in r)
    assert torch[0] < requirements  # requirements.txt's own pin is then met by the CPU build
    assert args("FROM") == ["python:3.11-slim"]


def test_the_image_copies_what_app_py_needs_and_installs_the_package_with_its_models():
    copied = {src for line in args("COPY") for src in line.split()[:-1]}
    assert {"app.py", "attention_viz/", "requirements.txt", "pyproject.toml", "README.md"} <= copied, copied
    # app.py imports the package and the standard library only
    imports = {alias.name.split(".")[0] for node in ast.walk(ast.parse((ROOT / "app.py").read_text()))
               if isinstance(node, (ast.Import, ast.ImportFrom))
               for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")])}
    assert imports <= {"attention_viz"} | set(sys.stdlib_module_names), imports
    assert any(r.startswith("pip install --no-deps .") for r in args("RUN"))  # package data: the shipped models
    assert args("CMD") == ['["python", "app.py"]']


def test_the_image_runs_as_a_user_of_its_own_on_all_interfaces_at_7860():
    users = args("USER")
    assert users and users[-1] not in ("root", "0") and not users[-1].startswith(("root:", "0:")), users
    assert [n for n, _ in DOCKERFILE].index("USER") < [n for n, _ in DOCKERFILE].index("CMD")
    assert any("useradd" in r and "--uid 1000" in r and users[-1] in r.split() for r in args("RUN"))
    assert args("EXPOSE") == ["7860"]
    assert env()["GRADIO_SERVER_NAME"] == "0.0.0.0" and env()["GRADIO_SERVER_PORT"] == "7860"


def test_the_hub_cache_is_a_volume_read_offline():
    variables = env()
    assert variables["HF_HUB_OFFLINE"] == "1"
    assert json.loads(args("VOLUME")[0]) == [variables["HF_HOME"]]


def test_the_healthcheck_asks_the_apps_readiness_endpoint():
    (check,) = args("HEALTHCHECK")
    assert f"http://127.0.0.1:7860{HEALTH_PATH}" in check and "CMD" in check


def glob(pattern: str) -> re.Pattern:
    """A .dockerignore pattern as a regular expression: `**/` any folders, `*` and `?` within one name."""
    out = re.sub(r"\\\*\\\*/", "(?:.*/)?", re.escape(pattern))
    return re.compile(out.replace(r"\*", "[^/]*").replace(r"\?", "[^/]"))


def ignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern that matches the path, or one of its parent folders, decides."""
    parts = path.split("/")
    verdict = False
    for pattern in patterns:
        regex = glob(pattern.removeprefix("!").rstrip("/"))
        if any(regex.fullmatch("/".join(parts[:i])) for i in range(1, len(parts) + 1)):
            verdict = not pattern.startswith("!")
    return verdict


def test_the_build_context_holds_what_the_dockerfile_copies_and_little_else():
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    needed = ["app.py", "requirements.txt", "pyproject.toml", "README.md", "attention_viz/__init__.py",
              *(str(p.relative_to(ROOT)) for p in (ROOT / "attention_viz" / "data" / "models").rglob("*") if p.is_file())]
    assert not [p for p in needed if ignored(p, patterns)]
    assert all(ignored(p, patterns) for p in ("tests/test_deploy.py", ".git/HEAD", "benchmarks/results/x.json",
                                              "assets/screenshots/a.png", "attention_viz/__pycache__/x.pyc"))


# -- Kubernetes


def manifests() -> dict[str, dict]:
    """Kind -> the one object of that kind in deploy/kubernetes/ (kustomization.yaml apart)."""
    objects = {}
    for path in sorted(MANIFESTS.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for document in yaml.safe_load_all(path.read_text()):
            assert document["kind"] not in objects, f"two {document['kind']}s"
            objects[document["kind"]] = document
    return objects


K8S = manifests()


def container() -> dict:
    (app,) = K8S["Deployment"]["spec"]["template"]["spec"]["containers"]
    return app


def test_every_manifest_is_applied_by_the_kustomization():
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(p.name for p in MANIFESTS.glob("*.yaml")
                                                         if p.name != "kustomization.yaml")
    assert set(K8S) == {"Deployment", "Service", "Ingress", "HorizontalPodAutoscaler", "PersistentVolumeClaim"}


def test_the_selectors_match_the_pods_labels():
    deployment = K8S["Deployment"]["spec"]
    labels = deployment["template"]["metadata"]["labels"]
    assert deployment["selector"]["matchLabels"].items() <= labels.items()
    assert K8S["Service"]["spec"]["selector"].items() <= labels.items()
    assert deployment["replicas"] >= 2


def test_the_probes_ask_the_apps_readiness_endpoint_on_its_port():
    app = container()
    ports = {p["name"]: p["containerPort"] for p in app["ports"]}
    assert ports == {"http": int(args("EXPOSE")[0])}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert app[probe]["httpGet"] == {"path": HEALTH_PATH, "port": "http"}, probe
    assert K8S["Service"]["spec"]["ports"][0]["targetPort"] in ports


def test_two_cpus_requested_and_limited_as_measured():
    resources = container()["resources"]
    assert str(resources["requests"]["cpu"]) == str(resources["limits"]["cpu"]) == "2"
    assert resources["requests"]["memory"] and resources["limits"]["memory"]


def test_the_hub_cache_is_mounted_read_only_where_the_image_reads_it_offline():
    app, pod = container(), K8S["Deployment"]["spec"]["template"]["spec"]
    variables = {e["name"]: e.get("value") for e in app["env"]}
    assert variables["HF_HOME"] == env()["HF_HOME"] and variables["HF_HUB_OFFLINE"] == "1"
    assert "ATTENTION_VIZ_HUB_MODELS" in variables
    (mount,) = [m for m in app["volumeMounts"] if m["mountPath"] == variables["HF_HOME"]]
    assert mount["readOnly"] is True
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert volume["persistentVolumeClaim"]["claimName"] == K8S["PersistentVolumeClaim"]["metadata"]["name"]
    assert volume["persistentVolumeClaim"]["readOnly"] is True
    assert "ReadOnlyMany" in K8S["PersistentVolumeClaim"]["spec"]["accessModes"]


def test_the_pods_run_as_the_images_user_without_privileges():
    pod = K8S["Deployment"]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 1000
    assert container()["securityContext"]["allowPrivilegeEscalation"] is False


def test_sessions_stay_on_one_pod():
    """Gradio's queue join and its event stream must reach the same process (docs/deploy.md, benchmarks/replicas.py)."""
    service = K8S["Service"]["spec"]
    assert service["sessionAffinity"] == "ClientIP" and service["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"] >= 3600
    ingress = K8S["Ingress"]
    notes = ingress["metadata"]["annotations"]
    assert notes["nginx.ingress.kubernetes.io/affinity"] == "cookie"
    assert notes["nginx.ingress.kubernetes.io/affinity-mode"] == "persistent"  # scaling up keeps placed sessions
    assert notes["nginx.ingress.kubernetes.io/proxy-buffering"] == "off"       # server-sent events as they come
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["name"] == K8S["Service"]["metadata"]["name"]
    assert backend["port"]["name"] in {p["name"] for p in K8S["Service"]["spec"]["ports"]}


def test_the_autoscaler_scales_the_deployment_on_cpu():
    hpa = K8S["HorizontalPodAutoscaler"]["spec"]
    target = hpa["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", K8S["Deployment"]["metadata"]["name"])
    (metric,) = hpa["metrics"]
    assert metric["resource"]["name"] == "cpu" and 0 < metric["resource"]["target"]["averageUtilization"] <= 100
    assert 1 <= hpa["minReplicas"] <= K8S["Deployment"]["spec"]["replicas"] <= hpa["maxReplicas"]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed (the YAML is checked above)")
def test_kubectl_renders_the_kustomization_offline():
    done = subprocess.run(["kubectl", "kustomize", str(MANIFESTS)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert [d["kind"] for d in yaml.safe_load_all(done.stdout)] == [
        "Service", "PersistentVolumeClaim", "Deployment", "HorizontalPodAutoscaler", "Ingress"]


def test_a_real_model_loads_offline_from_a_hub_cache_as_the_volume_holds_it(tmp_path):
    """The Space's models (SPACE_DEFAULT, nothing named, SPACE_ID set) from HF_HOME as the Hub's cache lays them out,
    the Hub off: opus-mt-en-de (a tiny Marian under its name) loads, SmolLM2-135M (a tiny Llama-class model with
    its 8,192 positions under its name) reads a page past 256 tokens, and dinov2-small and whisper-tiny (a tiny DINOv2
    and a tiny Whisper under their names) are the Pictures and sound tab's, read by their configs, a picture and a
    recording shown. One process for all (its start is most of the cost)."""
    pytest.importorskip("transformers")
    from devtools.hub_models import save_tiny, save_tiny_image, save_tiny_whisper

    revision = "0" * 40
    hub = tmp_path / "hf" / "hub"
    for name, family in (("Helsinki-NLP--opus-mt-en-de", "marian"), ("HuggingFaceTB--SmolLM2-135M", "llama"),
                         ("facebook--dinov2-small", "dinov2"), ("openai--whisper-tiny", "whisper")):
        repo = hub / f"models--{name}"
        snapshot = repo / "snapshots" / revision
        folder = (save_tiny_image(family, snapshot) if family == "dinov2" else save_tiny_whisper(snapshot)
                  if family == "whisper" else save_tiny(family, snapshot))
        if family == "llama":
            config = json.loads((folder / "config.json").read_text())
            (folder / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 8192}))
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text(revision)
    script = ("import json; from attention_viz.service.catalog import Catalog; "
              "from attention_viz.service.long_runs import LongRuns; c = Catalog(); "
              "m = c.real.get('hub:Helsinki-NLP/opus-mt-en-de'); "
              "p = LongRuns(c.real).read('hub:HuggingFaceTB/SmolLM2-135M', 'the cat sat on the mat. ' * 60); "
              "from attention_viz.service.media_view import MediaViews; from attention_viz.service.pngstore import "
              "PngStore; import pathlib, numpy, soundfile; v = MediaViews(c.real, PngStore(pathlib.Path('png'))); "
              "soundfile.write('a.wav', numpy.zeros(8000, 'float32'), 16000); "
              "pic = str(pathlib.Path(__import__('attention_viz').__file__).parent / 'data' / 'sample_picture.png'); "
              "a = v.view('hub:facebook/dinov2-small', pic); b = v.view('hub:openai/whisper-tiny', 'a.wav'); "
              "print(json.dumps([c.real.keys, m.family.name, p['read'], p['of'], p['note'], c.real.text_keys, "
              "v.choices(), a['query'], 'Transcript' in b['notes']]))")
    environ = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT),
               "SPACE_ID": "someone/attention_viz"}
    environ.pop("ATTENTION_VIZ_HUB_MODELS", None)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=environ, cwd=tmp_path,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    keys, family, read, of, note, text, media, query, transcribed = json.loads(done.stdout.strip().split("\n")[-1])
    assert keys == ["hub:Helsinki-NLP/opus-mt-en-de", "hub:HuggingFaceTB/SmolLM2-135M", "hub:facebook/dinov2-small",
                    "hub:openai/whisper-tiny"] and family == "Marian"
    assert read == of > 256 and note == ""  # every token read: its positions go past 256
    assert text == keys[:2] and [value for _, value in media] == keys[2:] and query == 0 and transcribed

def test_the_space_preloads_exactly_the_models_it_offers():
    """The README's front matter (the Space's preload_from_hub) names SPACE_DEFAULT, the models a Space offers."""
    from attention_viz.service.real_models import SPACE_DEFAULT

    front = yaml.safe_load((ROOT / "README.md").read_text().split("---")[1])
    assert tuple(front["preload_from_hub"]) == SPACE_DEFAULT

