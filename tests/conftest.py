"""Shared fixtures: doit projects in tmp dirs (real or fake stages), a session-wide real build, `gpu` skipping."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
KERNELS = REPO / "kernels"

# Build-graph tests copy kernels/ into a project and build it many times. They keep the library's
# memory-bound variants and two tutorial-03 matmul variants: the tensor-core kernels (attention,
# grouped GEMM, linear, fp8 and the rest of the autotune list: 60 variants) take minutes per real
# build on the 2-core CI machine and add no build-graph behaviour; tests/backend builds every one.
PROJECT_TENSOR_CORE_KEEP = ("matmul_fp16_128x128x64_w4_s4", "matmul_fp16_leaky_relu_64x64x32_w4_s4")
PROJECT_TENSOR_CORE_FILES = ("matmul.py", "matmul_fp8.py", "attention.py", "grouped_gemm.py", "linear.py",
                             "matmul_autotune.py", "matmul_descriptor.py", "matmul_persistent.py")


def project_variants(text: str) -> str:
    """kernels/variants.toml for a test project: the blocks described above, comments kept."""
    head, *blocks = text.split("[[variant]]")

    def field(block: str, key: str) -> str:
        m = re.search(rf'^{key}\s*=\s*"([^"]+)"', block, re.M)
        return m.group(1) if m else ""

    keep = [b for b in blocks if field(b, "file") not in PROJECT_TENSOR_CORE_FILES
            or field(b, "name") in PROJECT_TENSOR_CORE_KEEP]
    return head + "".join("[[variant]]" + b for b in keep)


# The stand-in stage set (tests/fake_stages/, a package beside this file): graph behaviour
# that must not wait on the compiler. Tests name it "fake_stages" through the Python API.
FAKE_STAGES = "fake_stages"
TESTS = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def fake_stage_root() -> Path:
    """The folder to put on the path for `import fake_stages` (tests/)."""
    return TESTS


RUN_LINE = re.compile(r"^(\.  |C  |-- |!! )(\S+)", re.M)
FAIL_LINE = re.compile(r"^(TaskFailed|TaskError|SetupError|UnmetDependency) - taskid:(\S+)", re.M)


@dataclass
class DoitRun:
    """One `python -m doit` run: exit status, output, and which tasks ran / were up to date."""

    rc: int
    out: str
    err: str
    ran: set = field(default_factory=set)
    cached: set = field(default_factory=set)
    uptodate: set = field(default_factory=set)
    skipped: set = field(default_factory=set)
    failed: dict = field(default_factory=dict)
    docs: dict = field(default_factory=dict)

    @property
    def text(self) -> str:
        return self.out + self.err


@dataclass
class Project:
    """A kernel library copied into a tmp dir with its own dodo.py and artifacts/.

    `env` is added to every run's environment. Builds default to `TTBUILD_CACHE=off`: graph
    tests assert which stages rerun, and a hit from ~/.cache/ttbuild must never hide one.
    Cache tests set `TTBUILD_CACHE_DIR` (and `TTBUILD_CACHE`) there instead.
    """

    root: Path
    stages: str
    pythonpath: str
    env: dict = field(default_factory=lambda: {"TTBUILD_CACHE": "off"})

    def run_env(self) -> dict:
        env = dict(os.environ, PYTHONPATH=self.pythonpath, PYTHONDONTWRITEBYTECODE="1")
        env.pop("TTBUILD_CACHE", None)
        env.pop("TTBUILD_CACHE_READONLY", None)
        env["TTBUILD_LIST_UPTODATE"] = "1"  # tests read which tasks were up to date (DoitRun.uptodate)
        env.update(self.env)
        return env

    def artifact_bytes(self) -> dict[str, bytes]:
        """Every file under artifacts/ but doit's DB and the build's lock, clean mark and record: relative
        path -> bytes."""
        out = {}
        for path in sorted(self.artifacts.rglob("*")):
            rel = path.relative_to(self.artifacts).as_posix()
            if path.is_file() and not rel.startswith((".doit.db", ".ttbuild.lock", ".ttbuild.clean", ".ttbuild-build.json")):
                out[rel] = path.read_bytes()
        return out

    @property
    def kernels(self) -> Path:
        return self.root / "kernels"

    @property
    def artifacts(self) -> Path:
        return self.root / "artifacts"

    def doit(self, *args: str, timeout: float = 900) -> DoitRun:
        return self._parse(self.run(["-m", "doit", *args], timeout=timeout))

    def ttbuild(self, *args: str, timeout: float = 900) -> DoitRun:
        """`python -m ttbuild ARGS` in the project root (CI=1: plain output), parsed like doit's;
        a fake-stage project calls `ttbuild.cli.main(ARGS, stage_package="fake_stages")`."""
        return self._parse(self.run(self.ttbuild_argv(*args), timeout=timeout))

    def ttbuild_argv(self, *args: str) -> list[str]:
        """Python's arguments for `ttbuild ARGS` on this project's stages."""
        if self.stages == "fake":
            code = f"import sys; from ttbuild.cli import main; sys.exit(main(sys.argv[1:], stage_package={FAKE_STAGES!r}))"
            return ["-c", code, *args]
        return ["-m", "ttbuild", *args]

    def run(self, argv: list[str], timeout: float = 900) -> subprocess.CompletedProcess:
        env = self.run_env()
        env.setdefault("CI", "1")
        return subprocess.run([sys.executable, *argv], cwd=self.root, env=env,
                              capture_output=True, text=True, timeout=timeout)

    @staticmethod
    def _parse(proc: subprocess.CompletedProcess) -> DoitRun:
        run = DoitRun(proc.returncode, proc.stdout, proc.stderr)
        for mark, rest in RUN_LINE.findall(proc.stdout):
            {".  ": run.ran, "C  ": run.cached, "-- ": run.uptodate, "!! ": run.skipped}[mark].add(rest)
        for line in proc.stdout.splitlines():
            m = RUN_LINE.match(line)
            if m:
                run.docs[m.group(2)] = line[m.end():].strip()
        for kind, name in FAIL_LINE.findall(proc.stdout + proc.stderr):
            run.failed[name] = kind
        return run

    def edit(self, rel: str, old: str, new: str) -> None:
        path = self.kernels / rel
        text = path.read_text()
        assert old in text, f"{old!r} not in {rel}"
        path.write_text(text.replace(old, new, 1))


def make_project(dest: Path, stages: str, fake_root: Path | None, source: Path | None = None) -> Project:
    """A project at `dest`: kernels/ copied from `source` (a built project, artifacts and all)
    or from the repo; dodo.py is the repo's own for real stages, a fake-stage one otherwise."""
    if source is not None:
        shutil.copytree(source, dest, symlinks=True)
    else:
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copytree(KERNELS, dest / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
        (dest / "kernels" / "variants.toml").write_text(project_variants((KERNELS / "variants.toml").read_text()))
        if stages == "real":
            shutil.copy2(REPO / "dodo.py", dest / "dodo.py")
        else:
            (dest / "dodo.py").write_text(
                '"""Test dodo: the ttbuild graph over fake stages."""\n'
                "from ttbuild.graph import namespace\n"
                f'_ns = namespace("kernels", "artifacts", stage_package={FAKE_STAGES!r})\n'
                'DOIT_CONFIG = _ns["DOIT_CONFIG"]\n'
                'task_ttbuild = _ns["task_ttbuild"]\n')
    paths = [str(REPO)] + ([str(fake_root)] if fake_root else [])
    return Project(dest, stages, os.pathsep.join(paths))


_BUILT: dict[str, Path] = {}


@pytest.fixture(scope="session")
def built_project_factory(tmp_path_factory, fake_stage_root):
    """`factory(stages)` -> a project built once per session ("fake" or "real"). Tests that
    mutate take a copy via `project_copy`."""

    def factory(stages: str) -> Project:
        if stages not in _BUILT:
            root = tmp_path_factory.mktemp(f"built-{stages}") / "proj"
            proj = make_project(root, stages, fake_stage_root)
            run = proj.doit()
            if run.rc != 0:
                pytest.fail(f"clean {stages} build failed:\n{run.text[-6000:]}")
            _BUILT[stages] = root
        return Project(_BUILT[stages], stages, os.pathsep.join([str(REPO), str(fake_stage_root)]))

    return factory


@pytest.fixture(params=["fake", "real"])
def stages(request) -> str:
    """Run a graph test on the fake stage set and again on the real compiler."""
    return request.param


@pytest.fixture
def project_copy(tmp_path, built_project_factory, fake_stage_root):
    """`copy(stages)` -> a private copy of the session's built project, artifacts and doit DB included."""

    def copy(stages: str) -> Project:
        built = built_project_factory(stages)
        return make_project(tmp_path / f"proj-{stages}", stages, fake_stage_root, source=built.root)

    return copy


@pytest.fixture
def fresh_project(tmp_path, fake_stage_root):
    """`fresh(stages)` -> an unbuilt project (kernels + dodo) in a tmp dir."""

    def fresh(stages: str) -> Project:
        return make_project(tmp_path / f"fresh-{stages}", stages, fake_stage_root)

    return fresh


@pytest.fixture(scope="session")
def new_project(fake_stage_root):
    """`new(dest, stages="fake", source=None)` -> make_project at `dest` (tests cannot import this
    conftest by name: tests/gpu has one too)."""

    def new(dest: Path, stages: str = "fake", source: Path | None = None) -> Project:
        return make_project(dest, stages, fake_stage_root, source=source)

    return new


@pytest.fixture(scope="session")
def nginx_cache(tmp_path_factory):
    """A real nginx WebDAV server on loopback speaking the Bazel cache layout (tests/cache_server.py)."""
    from cache_server import NginxDav, find_nginx

    exe = find_nginx()
    if exe is None:
        pytest.skip("no nginx with --with-http_dav_module on PATH (apt-get install -y nginx)")
    server = NginxDav(exe, tmp_path_factory.mktemp("nginx-build")).start()
    yield server
    server.stop()


def _gpu_available() -> bool:
    try:
        from cuda.bindings import driver
    except ImportError:
        return False
    try:
        err, = driver.cuInit(0)[:1]
        if err != driver.CUresult.CUDA_SUCCESS:
            return False
        err, count = driver.cuDeviceGetCount()
        return err == driver.CUresult.CUDA_SUCCESS and count > 0
    except Exception:
        return False


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Say why tests skipped, grouped by cause (tests/skips.py): a GPU, the Triton oracle, nginx."""
    from skips import reason_of, summary

    skipped = terminalreporter.stats.get("skipped", [])
    if skipped:
        terminalreporter.write_sep("-", f"{len(skipped)} skipped: why")
        for line in summary(reason_of(r) for r in skipped):
            terminalreporter.write_line(line)


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if gpu_items and not _gpu_available():
        skip = pytest.mark.skip(reason="needs an NVIDIA GPU (cuda.bindings found none)")
        for item in gpu_items:
            item.add_marker(skip)
