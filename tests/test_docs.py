"""The documentation, checked as a reader would: the committed pages are what the code generates now
(``scripts/gen_docs.py --check``); the site built with MkDocs ``--strict`` (a broken link, a missing page or a
missing snippet fails), then every page opened in headless Chromium (Debian's package, driven by Playwright): each
renders its content, its images load, and its internal links and their anchors resolve. Every shell command shown in
the README and the pages parses against pacer's own CLI (or names a folder and file that exist) and is run, as shown
or by the test :data:`RUN_BY` names; every Python block compiles, calls pacer_spark with keywords its functions take
and is run by the test :data:`PYTHON_RUN_BY` names (the quick start's: tests/test_new_user.py, in a new user's
install): here the README's, the landing page's and the Kafka page's on a broker, the strategy page's plugin through
the conformance suite, exactly as shown."""

from __future__ import annotations

import ast
import contextlib
import functools
import http.server
import importlib.util
import inspect
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urljoin, urlparse

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: The pages a reader runs commands from: the README and the hand-written pages (not the generated reference).
READ_AND_RUN = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(path: Path, *languages: str) -> list[str]:
    """The fenced code blocks of ``path`` in one of ``languages`` ("" for a block that names none)."""
    return [body for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", path.read_text(), re.S | re.M)
            if lang in languages]


def shell_commands(text: str) -> list[str]:
    """The commands of a shell block: continuation lines joined, comments dropped, ``a && b`` as two."""
    out = []
    for line in text.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        command: list[str] = []
        for word in [*words, "&&"]:
            if word == "&&":
                if command:
                    out.append(shlex.join(command))
                command = []
            else:
                command.append(word)
    return out


def test_the_committed_pages_are_what_the_code_generates() -> None:
    checked = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_docs.py"), "--check"], cwd=ROOT,
                             capture_output=True, text=True, timeout=300)
    assert checked.returncode == 0, checked.stderr[-3000:]


def test_every_shell_command_shown_parses_against_what_it_runs() -> None:
    from pacer.cli.program import build_parser
    from pacer.plugins import get_plugin_manager

    parser, _ = build_parser(get_plugin_manager())
    sessions = set(re.findall(r"^def (\w+)\(session", (ROOT / "noxfile.py").read_text(), re.M))
    checked = 0
    for path in READ_AND_RUN:
        shown = [(b, True) for b in blocks(path, "bash", "sh")] + [(b, False) for b in blocks(path, "")]
        for block, shell in shown:  # a block naming no language: only its pacer commands (else output, a transcript)
            for command in shell_commands(block) if shell else [c for c in block.replace("\\\n", " ").splitlines()
                                                                 if c.startswith("pacer ")]:
                words = shlex.split(command, comments=True)
                while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
                    words = words[1:]  # an environment variable set for the command
                where = f"{path.relative_to(ROOT)}: {command}"
                if words[0] == "pacer":
                    said = io.StringIO()
                    with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
                        try:
                            parser.parse_args(words[1:])
                        except SystemExit as exc:
                            assert exc.code == 0, f"{where}: {said.getvalue()}"
                elif words[:4] == ["python", "-m", "pip", "install"]:
                    for arg in words[4:]:
                        if arg.startswith("./"):
                            assert (ROOT / arg.split("[")[0] / "pyproject.toml").is_file(), where
                    if "-r" in words:
                        assert (ROOT / words[words.index("-r") + 1]).is_file(), where
                elif words[:3] == ["python", "-m", "pytest"]:
                    _check_pytest_arguments(words[3:], where)
                elif words[0] == "nox":
                    assert words[1:2] in (["--list"], ["-s"]), where
                    assert words[1] == "--list" or words[2] in sessions, where
                elif words[0] in ("git", "cd", ".", "source") or words[:3] == ["python3", "-m", "venv"]:
                    pass  # getting the code and a virtual environment: the shell's own
                else:
                    pytest.fail(f"{where}: a command this test does not know how to check; teach it")
                checked += 1
    assert checked >= 15, checked


def _calls(tree: ast.AST) -> Iterator[ast.Call]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "pacer_spark":
            yield node


def test_every_python_block_compiles_and_calls_pacer_spark_as_it_takes() -> None:
    import pacer_spark

    checked = 0
    for path in READ_AND_RUN:
        for block in blocks(path, "python"):
            code = block.replace("\n...\n", "\n")  # "..." stands for the rest of a job
            tree = ast.parse(code, filename=str(path))
            for call in _calls(tree):
                fn = getattr(pacer_spark, call.func.attr)  # type: ignore[attr-defined]
                args = [None] * len(call.args)
                kwargs = {k.arg: None for k in call.keywords if k.arg}
                inspect.signature(fn).bind(*args, **kwargs)  # a keyword it does not take raises
                checked += 1
    assert checked >= 8, checked


#: What runs each command the pages show (README and docs/), where no test runs it as shown at the size shown: its
#: first words -> the file that runs it and the test there (None: a script). ``pacer demo``, ``pacer produce``,
#: ``pacer calibrate`` and ``pacer bench fidelity`` take minutes as shown; their tests run them shorter. The
#: install lines are a new user's first steps, ``scripts/new_user_check.sh`` (clone, venv, the README's install
#: line, the quick start), which tests/test_new_user.py runs; ``.ci/run`` runs the README's test command.
RUN_BY = {
    "git clone": ("scripts/new_user_check.sh", None),
    "cd": ("scripts/new_user_check.sh", None),
    "python3 -m venv": ("scripts/new_user_check.sh", None),
    ". .venv/bin/activate": ("scripts/new_user_check.sh", None),
    "python -m pip install": ("scripts/new_user_check.sh", None),
    "python -m pytest": (".ci/run", None),
    "pacer demo": ("packages/pacer-bench/tests/test_demo.py",
                   "test_pacer_demo_runs_its_three_configurations_and_writes_the_report_folder"),
    "pacer kafka create-topic": ("tests/test_docs.py", "test_the_readme_python_block_runs_against_a_kafka_broker"),
    "pacer produce": ("tests/test_docs.py", "test_the_readme_python_block_runs_against_a_kafka_broker"),
    "pacer advise": ("integrations/pacer-spark/tests/test_your_query_page.py",
                     "test_the_your_query_page_runs_as_shown"),
    "pacer calibrate --runtime spark": ("integrations/pacer-spark/tests/test_calibrate_spark.py",
                                        "test_pacer_calibrate_measures_spark_and_a_session_starts_its_workload_from_"
                                        "the_profile"),
    "pacer run --runtime sim": ("tests/test_docs.py", "test_the_simulated_run_the_pages_show_runs_as_shown"),
    "pacer bench fidelity --runtime spark": ("integrations/pacer-spark/tests/test_fidelity_spark.py",
                                             "test_the_calibrated_simulator_predicts_a_short_spark_run_within_the_"
                                             "bounds"),
}
#: What runs each page's Python blocks: the page -> the file whose test reads and runs them (deploying.md's needs a
#: cluster: its settings are set as shown by test_docs_settings.py, its report's keys read by the cluster's test).
PYTHON_RUN_BY = {
    "README.md": ["tests/test_docs.py"],
    "docs/index.md": ["tests/test_docs.py"],
    "docs/kafka.md": ["tests/test_docs.py"],
    "docs/quickstart.md": ["tests/test_new_user.py"],
    "docs/writing-a-strategy.md": ["tests/test_docs.py"],
    "docs/notebook.md": ["integrations/pacer-spark/tests/test_notebook_page.py"],
    "docs/your-query.md": ["integrations/pacer-spark/tests/test_your_query_page.py"],
    "docs/monitoring.md": ["integrations/pacer-spark/tests/metrics_app.py"],
    "docs/deploying.md": ["integrations/pacer-spark/tests/test_docs_settings.py",
                          "integrations/pacer-spark/tests/test_cluster_autoscale.py"],
}


def _shown_commands() -> Iterator[tuple[str, str]]:
    """Every command the pages show: (where, the command), a ``pacer`` line of an unlabelled block included."""
    for path in READ_AND_RUN:
        for block in blocks(path, "bash", "sh"):
            for command in shell_commands(block):
                yield f"{path.relative_to(ROOT)}: {command}", command
        for block in blocks(path, ""):
            for line in block.replace("\\\n", " ").splitlines():
                if line.startswith("pacer "):
                    yield f"{path.relative_to(ROOT)}: {line}", shlex.join(shlex.split(line, comments=True))


def test_every_command_and_python_block_shown_is_run_by_a_test() -> None:
    """Each command shown is run as shown or by the test :data:`RUN_BY` names (which exists and runs that
    command); each page's Python blocks by the test that reads that page (:data:`PYTHON_RUN_BY`)."""
    seen = set()
    for where, command in _shown_commands():
        runners = [key for key in RUN_BY if command == key or command.startswith(key + " ")]
        assert runners, f"{where}: no test runs this command; run it in one and name it in RUN_BY"
        path, test = RUN_BY[max(runners, key=len)]
        source = (ROOT / path).read_text()
        assert test is None or re.search(rf"^def {test}\(", source, re.M), (where, path, test)
        words = [w for w in max(runners, key=len).split() if w not in ("pacer", "python", "-m", "--runtime")]
        assert all(re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", source) for w in words), (where, path, words)
        seen.add(max(runners, key=len))
    assert seen == set(RUN_BY), set(RUN_BY) - seen  # a runner named for a command no page shows any more
    assert "scripts/new_user_check.sh" in (ROOT / "tests" / "test_new_user.py").read_text()
    shown = {str(p.relative_to(ROOT)) for p in READ_AND_RUN if blocks(p, "python")}
    assert shown == set(PYTHON_RUN_BY), shown ^ set(PYTHON_RUN_BY)
    for page, runners in PYTHON_RUN_BY.items():
        for runner in runners:
            assert Path(page).name in (ROOT / runner).read_text(), (page, runner)


def test_the_simulated_run_the_pages_show_runs_as_shown(tmp_path: Path) -> None:
    """docs/your-query.md's simulated run, as shown, on the LR2 profile ``pacer calibrate --runtime spark``
    measured (bench-results/engine-profile: the page's first command's output, as a user's folder holds it)."""
    (command,) = [c for _, c in _shown_commands() if c.startswith("pacer run --runtime sim")]
    shutil.copy(ROOT / "bench-results" / "engine-profile" / "lr2-spark.json", tmp_path / "lr2-spark.json")
    words = shlex.split(command)
    ran = subprocess.run([sys.executable, "-m", "pacer.cli", *words[1:]], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-3000:]
    row = next(line.split() for line in ran.stdout.splitlines() if line.startswith("lr2 "))
    assert row[-1] == "600/600" and int(row[1]) > 1, ran.stdout  # every dataset processed, in batches
    assert "all figures are simulated" in ran.stdout


def _check_pytest_arguments(args: list[str], where: str) -> None:
    """A ``python -m pytest`` line's arguments: a ``-m`` expression names registered marks only, ``-n`` (xdist) is a
    count or ``auto``, and any other word is a path of the repository."""
    registered = {line.split(":")[0].split("(")[0].strip() for line in
                  tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]}
    words = iter(args)
    for word in words:
        if word == "-m":
            marks = set(re.findall(r"\w+", next(words))) - {"and", "or", "not"}
            assert marks and marks <= registered, (where, marks - registered)
        elif word == "-n":
            value = next(words)
            assert value == "auto" or value.isdigit(), where
            assert importlib.util.find_spec("xdist") is not None, f"{where}: pytest-xdist is not installed"
        else:
            assert word.startswith("-") or (ROOT / word).exists(), where


def test_the_strategy_pages_plugin_passes_the_conformance_suite_as_the_page_says(tmp_path: Path) -> None:
    """docs/writing-a-strategy.md's module, registered under the ``pacer`` entry-point group as the page says (an
    installed distribution's metadata, on the path), and the shared suite subclassed in one line, run by pytest as
    its author would run it. (The page's first row budget never admitted empty files: this test found it.)"""
    (code,) = blocks(ROOT / "docs" / "writing-a-strategy.md", "python")
    name = re.search(r'StrategyInfo\("([\w-]+)"', code).group(1)  # type: ignore[union-attr]
    site_dir, tests = tmp_path / "site", tmp_path / "tests"
    (site_dir / "row_budget-0.1.dist-info").mkdir(parents=True)
    tests.mkdir()
    (site_dir / "row_budget.py").write_text(code)
    (site_dir / "row_budget-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: row-budget\n"
                                                                    "Version: 0.1\n")
    (site_dir / "row_budget-0.1.dist-info" / "entry_points.txt").write_text(f"[pacer]\n{name} = row_budget\n")
    (tests / "test_row_budget.py").write_text("from pacer_conformance import AdmissionConformance\n\n\n"
                                              f"class TestRowBudget(AdmissionConformance): strategies = ({name!r},)\n")
    env = {k: v for k, v in os.environ.items() if k != "PACER_PLUGINS"}
    env["PYTHONPATH"] = str(site_dir)
    ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                          str(tests)], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert ran.returncode == 0, ran.stdout[-4000:]
    from pacer_conformance import AdmissionConformance

    suite = [test for test in dir(AdmissionConformance) if test.startswith("test_")]
    assert ran.stdout.splitlines()[-1].startswith(f"{len(suite)} passed"), ran.stdout[-2000:]  # each of its tests


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_docs.py"), "--check", "--build", "--site",
                            str(out)],
                           cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-4000:]
    assert "WARNING -" not in built.stderr, built.stderr[-4000:]
    return out


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()


def test_the_site_has_every_page_of_its_navigation(site: Path) -> None:
    for page in ("quickstart", "getting-started", "your-query", "kafka", "choosing", "monitoring", "deploying",
                 "operations", "tuning", "troubleshooting", "compatibility", "writing-a-strategy", "architecture",
                 "changelog", "reference/results", "reference/options", "reference/api", "reference/strategies",
                 "reference/hooks", "reference/errors", "reference/upgrade-notes"):
        assert (site / page / "index.html").is_file(), page
    errors = (site / "reference" / "errors" / "index.html").read_text()
    assert "ScalingRefused" in errors and "KafkaSourceError" in errors  # generated from every package's raises
    assert "cannot attach to a Spark Connect session" in errors  # a message kept in a constant, shown whole
    options = (site / "reference" / "options" / "index.html").read_text()
    assert "spark.pacer.deadline" in options and "spark.pacer.scale.executors" in options


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium: apt-get install chromium (CI's .ci/run installs it)")
def test_every_page_renders_with_its_images_and_internal_links(site: Path, served: str, tmp_path: Path) -> None:
    playwright = pytest.importorskip("playwright.sync_api", reason="pip install playwright (requirements-dev.txt)")
    pages = sorted(p.relative_to(site).parent.as_posix() for p in site.rglob("index.html")
                   if "assets" not in p.parts and "search" not in p.parts)
    assert len(pages) >= 22, pages
    linked: dict[str, set[str]] = {}
    with playwright.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        failed: list[str] = []
        # a request of the site's that failed; one the browser aborted because the test moved on (a favicon still
        # loading at the next goto) is not the site's: the page's own images are checked as loaded below
        page.on("requestfailed", lambda r: failed.append(f"{r.url}: {r.failure}")
                if r.url.startswith(served) and "ERR_ABORTED" not in (r.failure or "") else None)
        anchors: dict[str, set[str]] = {}
        for path in pages:
            url = urljoin(served, "" if path == "." else f"{path}/")
            response = page.goto(url, wait_until="load")
            assert response is not None and response.ok, (url, response and response.status)
            text = page.inner_text("article")
            assert len(text.strip()) > 100, (url, text[:200])
            assert "--8<--" not in text, f"{url}: a snippet was not included"
            broken = page.evaluate("Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0)"
                                   ".map(i => i.src)")
            assert not broken, (url, broken)
            anchors[url] = set(page.evaluate("Array.from(document.querySelectorAll('[id]')).map(e => e.id)"))
            for href in page.evaluate("Array.from(document.querySelectorAll('article a[href]')).map(a => a.href)"):
                if urlparse(href).netloc == urlparse(served).netloc:
                    linked.setdefault(href, set()).add(url)
            if path in ("getting-started", "reference/results"):
                page.screenshot(path=str(tmp_path / f"{path.replace('/', '-')}.png"), full_page=True)
        assert not failed, failed
        for href, sources in linked.items():
            target, fragment = urldefrag(href)
            if target not in anchors:
                response = page.goto(target, wait_until="load")
                assert response is not None and response.ok, (href, sorted(sources))
                anchors[target] = set(page.evaluate(
                    "Array.from(document.querySelectorAll('[id]')).map(e => e.id)"))
            if fragment:
                assert fragment in anchors[target], (href, sorted(sources))
        browser.close()
    assert (tmp_path / "getting-started.png").stat().st_size > 10_000


@pytest.mark.spark
def test_the_readme_python_block_runs_against_a_kafka_broker(kafka_broker: Any, tmp_path: Path) -> None:
    """The README's block as shown, its broker, folders and ``...`` (the rest of a job) given: records written while
    the query runs, then read."""
    (code,) = blocks(ROOT / "README.md", "python")
    assert "\n...\n" in code and code.count("localhost:9092") == 1
    servers = kafka_broker.bootstrap_servers
    produce = (f"import subprocess, sys\nsubprocess.run([sys.executable, '-m', 'pacer.cli', 'produce', "
               f"'--bootstrap-servers', {servers!r}, '--topic', 'events', '--workload', 'lr2', '--rate', '500', "
               f"'--duration', '3', '--quiet'], check=True)\nquery.processAllAvailable()\n")
    code = (code.replace("localhost:9092", servers).replace("/data/out", str(tmp_path / "out"))
            .replace("/data/ckpt", str(tmp_path / "ckpt")).replace("\n...\n", "\n" + produce))
    lines = code.rstrip().splitlines()  # its last two lines show values: print them
    code = "\n".join([*lines[:-2], *(f"print(repr({line.split('#')[0].strip()}))" for line in lines[-2:])])
    code += "\nquery.stop()\npacer.stop()\nspark.stop()\n"
    # the Kafka page's and the landing page's blocks first, each as shown on the same broker (the session they
    # build is the one the README's getOrCreate() returns): each attaches and builds its paced Kafka frame
    for page in ("index.md", "kafka.md"):
        (shown,) = blocks(ROOT / "docs" / page, "python")
        assert shown.count("localhost:9092") == 1, page
        code = (shown.replace("localhost:9092", servers) + "assert frame.isStreaming and not pacer.closed\n"
                f"print('ran docs/{page}')\npacer.stop()\n" + code)
    script = tmp_path / "readme.py"
    script.write_text(code)
    created = subprocess.run([sys.executable, "-m", "pacer.cli", "kafka", "create-topic", "--bootstrap-servers",
                              servers, "--topic", "events", "--partitions", "2"], capture_output=True, text=True,
                             timeout=120)  # the topic the README's job reads exists, as a user's would
    assert created.returncode == 0 or "exists" in created.stderr, created.stderr
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    ran = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=500,
                         env=env)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-4000:]
    assert "pacerReason" in ran.stdout and "'queries'" in ran.stdout, ran.stdout[-2000:]
    assert "ran docs/index.md" in ran.stdout and "ran docs/kafka.md" in ran.stdout, ran.stdout[-2000:]
