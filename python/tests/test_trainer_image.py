"""The trainer images (trainer/): what can be tested without building them. The fetch step
against a loopback server, the lock's install guard on stub packages in a real venv, the
lock resolving on PyPI, the FSDP2 config under the real accelerate (where installed), and the
Dockerfiles' paths against the repository and the recipes."""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import re
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import free_port
from waits import scaled

REPO = Path(__file__).resolve().parents[2]
TRAINER = REPO / "trainer"
FETCH = TRAINER / "fetch-scripts.sh"
SEED_REPO = "sergiopaniego/rl-envs-youtube-livestream-4-scripts"
SEED_FILES = {
    "train_coding_whitebox_eval.py": "SEED_SHA256_TRAIN_CODING_WHITEBOX_EVAL",
    "train_coding_whitebox.py": "SEED_SHA256_TRAIN_CODING_WHITEBOX",
    "train_wordle_whitebox.py": "SEED_SHA256_TRAIN_WORDLE_WHITEBOX",
}
COMMIT = "0123456789abcdef0123456789abcdef01234567"
DOCKERFILES = {"whitebox": TRAINER / "whitebox/Dockerfile", "blackbox": TRAINER / "blackbox/Dockerfile"}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A static file server on 127.0.0.1 (a free port) over tmp_path/srv: (base URL, root)."""
    root = tmp_path / "srv"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a, **k: None  # type: ignore[method-assign]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()
        server.server_close()


def publish_seeds(root: Path, commit: str = COMMIT) -> dict[str, bytes]:
    """The seed scripts as huggingface.co serves them: <repo>/resolve/<commit>/<file>."""
    folder = root / SEED_REPO / "resolve" / commit
    folder.mkdir(parents=True)
    contents = {name: f"# {name}\nprint('seed')\n".encode() for name in SEED_FILES}
    for name, data in contents.items():
        (folder / name).write_bytes(data)
    return contents


def fetch(base: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SEED_", "TRL_"))}
    return subprocess.run(
        ["bash", str(FETCH), *args], capture_output=True, text=True, timeout=scaled(60), env={**clean, "AGENTRL_FETCH_BASE_URL": base, **env}
    )


def pins_for(contents: dict[str, bytes]) -> dict[str, str]:
    return {"SEED_REVISION": COMMIT, **{SEED_FILES[n]: sha256(d) for n, d in contents.items()}}


def test_fetch_with_the_right_digests_lands_every_script(served: tuple[str, Path], tmp_path: Path) -> None:
    base, root = served
    contents = publish_seeds(root)
    r = fetch(base, "seed", str(tmp_path / "app"), **pins_for(contents))
    assert r.returncode == 0, r.stderr
    for name, data in contents.items():
        assert (tmp_path / "app" / name).read_bytes() == data
        assert f"{tmp_path / 'app' / name} (seed at {COMMIT}, sha256 verified)" in r.stdout


def test_a_changed_file_fails_naming_it_and_both_digests_and_nothing_lands(served: tuple[str, Path], tmp_path: Path) -> None:
    base, root = served
    contents = publish_seeds(root)
    pins = pins_for(contents)
    changed = b"# train_wordle_whitebox.py, changed upstream\n"
    (root / SEED_REPO / "resolve" / COMMIT / "train_wordle_whitebox.py").write_bytes(changed)
    r = fetch(base, "seed", str(tmp_path / "app"), **pins)
    assert r.returncode == 1
    assert (
        f"train_wordle_whitebox.py ({base}/{SEED_REPO}/resolve/{COMMIT}/train_wordle_whitebox.py): sha256 mismatch: "
        f"expected {pins['SEED_SHA256_TRAIN_WORDLE_WHITEBOX']} (SEED_SHA256_TRAIN_WORDLE_WHITEBOX), got {sha256(changed)}"
    ) in r.stderr
    assert "train_coding_whitebox.py" not in r.stderr.replace("train_coding_whitebox.py (", "")  # only the changed file is named
    assert not (tmp_path / "app").exists()


def test_missing_build_args_fail_naming_each(served: tuple[str, Path], tmp_path: Path) -> None:
    base, root = served
    contents = publish_seeds(root)
    pins = pins_for(contents)
    del pins["SEED_REVISION"], pins["SEED_SHA256_TRAIN_CODING_WHITEBOX"]
    r = fetch(base, "seed", str(tmp_path / "app"), **pins)
    assert r.returncode == 1
    assert "build ARG SEED_REVISION is not set: pass --build-arg SEED_REVISION=<40-hex commit>" in r.stderr
    assert "build ARG SEED_SHA256_TRAIN_CODING_WHITEBOX is not set: pass --build-arg SEED_SHA256_TRAIN_CODING_WHITEBOX=<sha256 of train_coding_whitebox.py>" in r.stderr
    assert "SEED_SHA256_TRAIN_WORDLE_WHITEBOX" not in r.stderr
    assert "'trainer/fetch-scripts.sh --print seed <commit>' prints every --build-arg of this set" in r.stderr
    assert not (tmp_path / "app").exists()


def test_a_branch_is_not_a_revision(served: tuple[str, Path], tmp_path: Path) -> None:
    base, root = served
    pins = pins_for(publish_seeds(root))
    r = fetch(base, "seed", str(tmp_path / "app"), **{**pins, "SEED_REVISION": "main"})
    assert r.returncode == 1
    assert "build ARG SEED_REVISION='main' is not a full 40-hex commit: pin a commit, not a branch or tag" in r.stderr
    r = fetch(base, "--print", "seed", "main")
    assert r.returncode == 1
    assert "'main' is not a full 40-hex commit" in r.stderr


def test_print_mode_prints_the_pins_that_then_build(served: tuple[str, Path], tmp_path: Path) -> None:
    base, root = served
    contents = publish_seeds(root)
    r = fetch(base, "--print", "seed", COMMIT)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines == [f"--build-arg {k}={v}" for k, v in pins_for(contents).items()]
    assert "trust on first use" in r.stderr
    # The printed lines are the build's input: fed back as the ARGs, the fetch passes.
    pins = dict(line.removeprefix("--build-arg ").split("=", 1) for line in lines)
    assert fetch(base, "seed", str(tmp_path / "app"), **pins).returncode == 0


def test_trl_set_fetches_from_github_raw_layout(served: tuple[str, Path], tmp_path: Path) -> None:
    base, root = served
    folder = root / "huggingface/trl" / COMMIT / "examples/async_grpo_opencode"
    folder.mkdir(parents=True)
    data = b"# opencode_hf_sandbox.py stand-in\n"
    (folder / "opencode_hf_sandbox.py").write_bytes(data)
    r = fetch(base, "trl-opencode", str(tmp_path / "app"), TRL_REVISION=COMMIT, TRL_SHA256_OPENCODE_HF_SANDBOX=sha256(data))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "app/opencode_hf_sandbox.py").read_bytes() == data
    assert fetch(base, "--print", "trl-opencode", COMMIT).stdout.splitlines() == [
        f"--build-arg TRL_REVISION={COMMIT}",
        f"--build-arg TRL_SHA256_OPENCODE_HF_SANDBOX={sha256(data)}",
    ]


# ---------------------------------------------------------------------------------------------
# The lock and its install guard


def requirement_pins() -> dict[str, str]:
    pins = {}
    for line in (TRAINER / "requirements.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            assert re.fullmatch(r"[a-z0-9][a-z0-9._-]*==[0-9][0-9A-Za-z.+!-]*", line), f"not an exact pin: {line!r}"
            name, version = line.split("==")
            pins[name] = version
    return pins


def test_requirements_pin_the_lock_exactly_and_leave_vllm_and_torch_to_the_base() -> None:
    pins = requirement_pins()
    assert {k: pins.get(k) for k in ("trl", "openenv", "bitsandbytes")} == {"trl": "1.16.0", "openenv": "0.10.0", "bitsandbytes": "0.50.2"}
    assert "trackio" in pins
    held = [n for n in pins if re.match(r"^(vllm|torch|torchvision|torchaudio|triton|xformers|flashinfer.*|nvidia-.*|cuda-.*)$", n)]
    assert held == [], f"packages the vLLM base image owns are pinned in requirements.txt: {held}"


def test_requirements_agree_with_the_test_lock() -> None:
    # One lock trainer-side: python/requirements-test.txt is the same resolution, frozen. Not in it:
    # bitsandbytes and kernels (images only) and setuptools (pip freeze leaves it out).
    def pins(path: Path) -> dict[str, str]:
        found = {}
        for line in path.read_text().splitlines():
            if line.strip() and not line.startswith("#") and "==" in line:
                name, version = line.split("==", 1)
                found[re.sub(r"[-_.]+", "-", name).lower()] = version.split(";")[0].strip()
        return found

    image, test = pins(TRAINER / "requirements.txt"), pins(REPO / "python/requirements-test.txt")
    differ = {n: (v, test.get(n)) for n, v in image.items() if n not in ("bitsandbytes", "kernels", "setuptools") and test.get(n) != v}
    assert differ == {}, f"trainer/requirements.txt vs python/requirements-test.txt: {differ}"


def test_requirements_resolve_with_vllm_0_29(tmp_path: Path) -> None:
    # As the image build resolves them (trainer/install-lock.sh adds the base's vllm pin).
    report = tmp_path / "report.json"
    r = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--disable-pip-version-check",
         "--report", str(report), "-r", str(TRAINER / "requirements.txt"), "vllm==0.29.0"],
        capture_output=True, text=True, timeout=scaled(900),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    chosen = {re.sub(r"[-_.]+", "-", i["metadata"]["name"]).lower(): i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}
    for name, version in requirement_pins().items():
        assert chosen.get(name) == version, f"{name}: pinned {version}, resolved {chosen.get(name)}"
    assert chosen["vllm"] == "0.29.0"


def stub_wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> None:
    """A minimal pure-Python wheel (stand-ins for vllm/torch: the real ones do not fit a unit test)."""
    module = name.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": "",
        f"{info}/METADATA": "Metadata-Version: 2.1\n" f"Name: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: agentrl-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{p},,\n" for p in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(folder / f"{module}-{version}-py3-none-any.whl", "w") as whl:
        for path, text in files.items():
            whl.writestr(path, text)


@pytest.fixture(scope="module")
def stub_image(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    """A venv standing in for the vLLM image's Python: stub vllm 0.29.0 with torch 2.13.0, triton
    3.0 (torch takes any >= 3, as torch's own CUDA deps are ranges vllm does not pin) and dep-x 1.0
    installed; newer triton and dep-x wheels on offer beside them."""
    root = tmp_path_factory.mktemp("stub-image")
    wheels = root / "wheels"
    wheels.mkdir()
    stub_wheel(wheels, "vllm", "0.29.0", ("torch==2.13.0", "dep-x==1.0"))
    stub_wheel(wheels, "torch", "2.13.0", ("triton>=3",))
    for v in ("3.0", "3.9"):
        stub_wheel(wheels, "triton", v)
    for v in ("1.0", "2.0"):
        stub_wheel(wheels, "dep-x", v)
    stub_wheel(wheels, "good-root", "1.0", ("torch>=2", "dep-x"))
    stub_wheel(wheels, "wants-new-triton", "1.0", ("triton>=3.9",))
    stub_wheel(wheels, "wants-new-dep", "1.0", ("dep-x==2.0",))
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=scaled(120))
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": "", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
           "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}  # fmt: skip
    subprocess.run([str(venv / "bin/python"), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheels), "vllm==0.29.0", "triton==3.0"], check=True, env=env, timeout=scaled(120))
    return venv, wheels, env


def install_lock(stub_image: tuple[Path, Path, dict[str, str]], tmp_path: Path, requirement: str) -> subprocess.CompletedProcess[str]:
    venv, wheels, env = stub_image
    reqs = tmp_path / "requirements.txt"
    reqs.write_text(requirement + "\n")
    return subprocess.run(
        ["bash", str(TRAINER / "install-lock.sh"), str(reqs), "--no-index", "--find-links", str(wheels)], capture_output=True, text=True, env=env, timeout=scaled(300)
    )


def frozen(stub_image: tuple[Path, Path, dict[str, str]]) -> set[str]:
    venv, _, env = stub_image
    out = subprocess.run([str(venv / "bin/python"), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True, env=env, check=True)
    return set(out.stdout.split())


def test_install_lock_keeps_the_base_vllm_and_torch(stub_image, tmp_path: Path) -> None:
    r = install_lock(stub_image, tmp_path, "good-root==1.0")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "holding 3 packages of the base image (vllm==0.29.0, torch==2.13.0)" in r.stdout
    assert "(held packages unchanged)" in r.stdout
    assert {"good-root==1.0", "torch==2.13.0", "triton==3.0", "vllm==0.29.0", "dep-x==1.0"} <= frozen(stub_image)


def test_install_lock_refuses_a_requirement_that_would_replace_a_held_package(stub_image, tmp_path: Path) -> None:
    # torch and vllm would both accept triton 3.9: only the held-packages constraint refuses it.
    r = install_lock(stub_image, tmp_path, "wants-new-triton==1.0")
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert "triton>=3.9" in out and "ResolutionImpossible" in out
    assert "triton==3.0" in frozen(stub_image)


def test_install_lock_refuses_a_version_vllm_does_not_accept(stub_image, tmp_path: Path) -> None:
    # dep-x is not held, but vllm==0.29.0 is part of the request, so vLLM's dep-x==1.0 still binds.
    r = install_lock(stub_image, tmp_path, "wants-new-dep==1.0")
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert "dep-x==2.0" in out and "ResolutionImpossible" in out
    assert "dep-x==1.0" in frozen(stub_image)


# ---------------------------------------------------------------------------------------------
# The FSDP2 accelerate config, under the real accelerate


def test_fsdp2_config_launches_fsdp_version_2(tmp_path: Path) -> None:
    pytest.importorskip("accelerate", reason="accelerate is not installed here (the trainer lock venv has it)")
    script = tmp_path / "env.py"
    script.write_text("import json, os\nprint(json.dumps({k: os.environ.get(k) for k in ('ACCELERATE_USE_FSDP', 'FSDP_VERSION', 'FSDP_STATE_DICT_TYPE', 'WORLD_SIZE')}))\n")
    r = subprocess.run(
        [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(TRAINER / "blackbox/fsdp2.yaml"),
         "--num_machines", "1", "--num_processes", "2", "--machine_rank", "0", "--main_process_port", str(free_port()), str(script)],
        capture_output=True, text=True, timeout=scaled(300), cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    # Both ranks write to the same pipe at exit: their lines can arrive run together
    # ("{...}{...}", seen in the empty-cache CI run at bfc41cd), so read every flat object.
    seen = [json.loads(obj) for obj in re.findall(r"\{[^{}]*\}", r.stdout)]
    assert seen == [{"ACCELERATE_USE_FSDP": "true", "FSDP_VERSION": "2", "FSDP_STATE_DICT_TYPE": "FULL_STATE_DICT", "WORLD_SIZE": "2"}] * 2


# ---------------------------------------------------------------------------------------------
# The Dockerfiles against the repository and the recipes


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    return [(m[1].upper(), m[2].strip()) for m in re.finditer(r"^\s*([A-Za-z]+)\s+(.*)$", text, re.M) if not m[0].lstrip().startswith("#")]


@pytest.mark.parametrize("kind", DOCKERFILES)
def test_dockerfile_copies_only_paths_that_exist_and_are_sent(kind: str) -> None:
    dockerfile = DOCKERFILES[kind]
    allowed = {line[1:] for line in dockerfile.with_name("Dockerfile.dockerignore").read_text().splitlines() if line.startswith("!")}
    copies = [args.split() for op, args in instructions(dockerfile) if op == "COPY"]
    assert copies
    for words in copies:
        for source in words[:-1]:
            assert (REPO / source).is_file(), f"{kind}: COPY {source}: no such file in the repository"
            assert source in allowed, f"{kind}: COPY {source}: excluded by Dockerfile.dockerignore"


@pytest.mark.parametrize("kind", DOCKERFILES)
def test_dockerfile_places_the_args_check_and_clears_the_entrypoint(kind: str) -> None:
    ops = instructions(DOCKERFILES[kind])
    # Where the platform runs it (ARGS_CHECK_PATH in components/training/program-args.ts).
    program_args = REPO / "components/training/program-args.ts"
    if program_args.exists():
        assert 'ARGS_CHECK_PATH = "/usr/local/lib/agentrl/args_check.py"' in program_args.read_text()
    assert ("COPY", "components/training/args/args_check.py /usr/local/lib/agentrl/args_check.py") in ops
    assert ("ARG", "VLLM_IMAGE=vllm/vllm-openai:v0.29.0") in ops
    assert ("FROM", "${VLLM_IMAGE}") in ops
    assert ("ENV", "VLLM_USE_FLASHINFER_SAMPLER=0") in ops
    assert ("ENTRYPOINT", "[]") in ops


@pytest.mark.parametrize(("kind", "set_name"), [("whitebox", "seed"), ("blackbox", "trl-opencode")])
def test_dockerfile_declares_every_pin_without_a_default_and_fetches_into_app(served: tuple[str, Path], kind: str, set_name: str) -> None:
    base, root = served
    publish_seeds(root)
    folder = root / "huggingface/trl" / COMMIT / "examples/async_grpo_opencode"
    folder.mkdir(parents=True)
    (folder / "opencode_hf_sandbox.py").write_text("#\n")
    printed = fetch(base, "--print", set_name, COMMIT)
    assert printed.returncode == 0, printed.stderr
    wanted = {line.removeprefix("--build-arg ").split("=")[0] for line in printed.stdout.splitlines()}
    ops = instructions(DOCKERFILES[kind])
    declared = {args for op, args in ops if op == "ARG"}
    assert wanted <= declared, f"{kind}: ARGs without a bare declaration: {sorted(wanted - declared)}"
    assert ("RUN", f"bash /opt/agentrl/fetch-scripts.sh {set_name} /app") in ops


def platform_app_paths() -> set[str]:
    """The /app paths the platform renders into the trainer command: the program table's
    `file:` entries (components/config/programs.ts) and any /app literal in the recipes."""
    paths: set[str] = set()
    for source in ("components/config/programs.ts", "components/config/recipes.ts"):
        if (REPO / source).exists():
            paths |= set(re.findall(r'"(/app/[A-Za-z0-9_.-]+)"', (REPO / source).read_text()))
    return paths


def image_app_paths() -> dict[str, set[str]]:
    """What each image holds under /app: its fetched set and its COPYs."""
    fetched = {"whitebox": {f"/app/{n}" for n in SEED_FILES}, "blackbox": {"/app/opencode_hf_sandbox.py"}}
    return {
        kind: fetched[kind] | {args.split()[-1] for op, args in instructions(dockerfile) if op == "COPY" and args.split()[-1].startswith("/app/")}
        for kind, dockerfile in DOCKERFILES.items()
    }


def test_every_path_the_platform_renders_is_in_an_image() -> None:
    named = platform_app_paths()
    held = image_app_paths()
    assert {f"/app/{n}" for n in SEED_FILES} <= named, "the platform no longer names the seed scripts: update the white-box image"
    assert named <= held["whitebox"] | held["blackbox"], f"named by the platform, in no image: {sorted(named - held['whitebox'] - held['blackbox'])}"
    assert "/app/fsdp2.yaml" in held["blackbox"]


# ---------------------------------------------------------------------------------------------
# The documented changes to TRL's opencode trainer (trainer/use_agent_sandbox.py)

USE_AGENT_SANDBOX = TRAINER / "use_agent_sandbox.py"
#: The three lines of huggingface/trl examples/async_grpo_opencode/opencode_hf_sandbox.py @0a942020 the change
#: touches (facts: its OpenEnv import, the backend argument in build_factory, trailing comment included, and
#: build_factory's return).
TRL_IMPORT = "from opencode_env.sandbox import HFSandboxBackend, SandboxHandle"
TRL_BACKEND_LINE = "        sandbox_backend=HFSandboxBackend(image=image, flavor=flavor),  # each rollout = its own remote HF sandbox"
TRL_RETURN_LINE = "    return OpencodeTaskFactory(inner)"

#: A script of the published shape, written for this test (not TRL's code): the import, a factory
#: built in a module-level function from HFSandboxBackend(image=, flavor=) and returned inside the
#: script's own adapter, and a main that builds it.
SHAPED_SCRIPT = f'''
import json, sys
{TRL_IMPORT}
from opencode_env.harness import OpenCodeSessionFactory


class OpencodeTaskFactory:
    def __init__(self, inner):
        self._inner = inner


def build_factory(image, flavor):
    inner = OpenCodeSessionFactory(
{TRL_BACKEND_LINE}
    )
{TRL_RETURN_LINE}


if __name__ == "__main__":
    f = build_factory(sys.argv[1], "cpu-basic")
    b = f._inner.sandbox_backend
    print(json.dumps({{"type": type(b).__name__, "image": b.image, "pool": b.settings.warm_pool, "factory": type(f).__name__}}))
'''

#: Stand-ins for OpenEnv's git-only opencode_env (named as such): just what the shaped script imports.
STANDIN_OPENCODE_ENV = {
    "opencode_env/__init__.py": "",
    "opencode_env/sandbox.py": "class HFSandboxBackend:\n    def __init__(self, **kw):\n        raise SystemExit('HFSandboxBackend used: the change did not apply')\n\nclass SandboxHandle: ...\n",
    "opencode_env/harness.py": "class OpenCodeSessionFactory:\n    def __init__(self, sandbox_backend):\n        self.sandbox_backend = sandbox_backend\n",
}


def use_agent_sandbox(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(USE_AGENT_SANDBOX), str(path)], capture_output=True, text=True, timeout=scaled(60))


def test_the_change_swaps_the_backend_line_and_the_script_then_runs_on_the_pool(tmp_path: Path) -> None:
    from test_backend import POOL_IMAGE, stack_env

    script = tmp_path / "opencode_hf_sandbox.py"
    script.write_text(SHAPED_SCRIPT)
    r = use_agent_sandbox(script)
    assert r.returncode == 0, r.stderr
    after = script.read_text().splitlines()
    before = SHAPED_SCRIPT.splitlines()
    added = ["from agent_rl_sandbox import AgentSandboxBackend", "from agent_rl_sandbox.trusted_trace import ForwarderTracedFactory"]
    changed = [(b, a) for b, a in zip(before, [line for line in after if line not in added]) if b != a]
    assert changed == [
        (TRL_BACKEND_LINE, "        sandbox_backend=AgentSandboxBackend(image=image, flavor=flavor),  # the stack's sandbox pool (agent-rl-infra)"),
        (TRL_RETURN_LINE, "    return ForwarderTracedFactory(OpencodeTaskFactory(inner))  # train on the forwarder's trace (agent-rl-infra)"),
    ]
    i = after.index(TRL_IMPORT)
    assert after[i + 1 : i + 3] == added
    assert len(after) == len(before) + 2
    for name, text in STANDIN_OPENCODE_ENV.items():
        (tmp_path / "site" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "site" / name).write_text(text)
    env = {**os.environ, **stack_env(), "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(REPO / "python")])}
    ran = subprocess.run([sys.executable, str(script), POOL_IMAGE], capture_output=True, text=True, timeout=scaled(120), env=env)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert json.loads(ran.stdout.splitlines()[-1]) == {"type": "AgentSandboxBackend", "image": POOL_IMAGE, "pool": "sandbox-pool-r1", "factory": "ForwarderTracedFactory"}
    # TRL's default --sandbox-image (the hosted one) is not the pool's: refused, naming both.
    other = subprocess.run([sys.executable, str(script), "ghcr.io/huggingface/openenv-opencode-sandbox:latest"], capture_output=True, text=True, timeout=scaled(120), env=env)
    assert other.returncode != 0 and POOL_IMAGE in other.stderr and "openenv-opencode-sandbox:latest" in other.stderr


@pytest.mark.parametrize(
    ("text", "found"),
    [
        (SHAPED_SCRIPT.replace(TRL_BACKEND_LINE, "        sandbox_backend=E2BSandboxBackend(),"), "found 0"),
        (SHAPED_SCRIPT.replace(TRL_BACKEND_LINE, TRL_BACKEND_LINE + "\n" + TRL_BACKEND_LINE), "found 2"),
        (SHAPED_SCRIPT.replace(TRL_IMPORT, "from opencode_env import sandbox"), "import ... HFSandboxBackend ...' line, found 0"),
        (SHAPED_SCRIPT.replace(TRL_RETURN_LINE, "    return inner"), "'return OpencodeTaskFactory(inner)' line, found 0"),
    ],
)
def test_the_change_refuses_a_script_it_was_not_written_for_and_leaves_it(tmp_path: Path, text: str, found: str) -> None:
    script = tmp_path / "opencode_hf_sandbox.py"
    script.write_text(text)
    r = use_agent_sandbox(script)
    assert r.returncode == 1
    assert found in r.stderr and "read the fetched revision of huggingface/trl examples/async_grpo_opencode/opencode_hf_sandbox.py" in r.stderr
    assert script.read_text() == text
    twice = tmp_path / "twice.py"
    twice.write_text(SHAPED_SCRIPT)
    assert use_agent_sandbox(twice).returncode == 0
    again = use_agent_sandbox(twice)
    assert again.returncode == 1 and "already imports AgentSandboxBackend" in again.stderr


def test_the_blackbox_image_installs_the_backend_and_applies_the_change_after_the_fetch() -> None:
    ops = instructions(DOCKERFILES["blackbox"])
    fetch_at = ops.index(("RUN", "bash /opt/agentrl/fetch-scripts.sh trl-opencode /app"))
    apply_at = ops.index(("RUN", "python3 /opt/agentrl/use_agent_sandbox.py /app/opencode_hf_sandbox.py"))
    install_at = next(i for i, (op, args) in enumerate(ops) if op == "RUN" and "pip install --no-cache-dir --no-deps /opt/agentrl/python" in args)
    assert fetch_at < apply_at and install_at < apply_at
    package = {p.name for p in (REPO / "python/agent_rl_sandbox").glob("*.py")}
    copied = {Path(args.split()[0]).name for op, args in ops if op == "COPY" and args.startswith("python/agent_rl_sandbox/")}
    assert copied == package, f"the image's backend package misses {sorted(package - copied)}"
    assert "k8s-agent-sandbox==1.0.8" in (TRAINER / "requirements.txt").read_text().splitlines()
