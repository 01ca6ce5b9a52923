# The two commands of README.md:
#   make book   create .venv, install everything, build the HTML book into _build/html
#               (English at its root, the Chinese edition in _build/html/zh_CN)
#   make test   everything `make book` does, then every test (lib, notebooks, browser)
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
.PHONY: pot msgfmt nbval check-seeds site-weight setup book pdf test unit notebooks notebooks-other-cpu browser chromium sandbox student grade bench clean lab

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

# Each notebook runs once (tools/chapter_runs.py: one per core at a time, and again only when
# its code cells or a file it read, such as a lib module it imported, changed); the build then
# reads the runs from myst-nb's cache and, being incremental, re-reads only the pages whose
# source or run changed. Both steps run every time: with nothing to do they take seconds.
# The Chinese edition is the same build with language zh_CN (tools/i18n.py build): it reads the
# same runs from the same cache (nothing runs twice), takes the English build's plot images, and
# lands in _build/html/zh_CN; a translation whose markup broke fails it like any warning.
book: $(STAMP)
	$(BIN)/python tools/chapter_runs.py book
	$(BIN)/jupyter-book build . --warningiserror --nitpick --keep-going
	$(BIN)/python tools/i18n.py build

# After a change to English prose: extract the pages' messages again and merge them into the
# Chinese catalogues (locale/zh_CN/LC_MESSAGES/<page>.po; a changed paragraph turns fuzzy, a new
# one untranslated, a removed one obsolete). Then translate them and run tools/po_check.py.
pot: $(STAMP)
	$(BIN)/python tools/i18n.py update

# GNU gettext's msgfmt checks the catalogues (tests/i18n/test_catalogues.py).
msgfmt:
	@command -v msgfmt >/dev/null || { apt-get update -qq && apt-get install -y -qq gettext >/dev/null; }

# The PDF edition: Debian's Chromium prints every page of the built book (tools/pdf.py), pypdf joins
# them into _build/pdf/book.pdf with a contents page, an outline and links that jump inside it.
# tests/book/test_pdf.py (a browser test, in test-other-lane) prints two pages the same way.
# PDF_HTML_URL: where the HTML edition is published (each explorer's link; default the build's folder).
PDF_HTML_URL ?=
pdf: book chromium
	$(BIN)/python tools/pdf.py $(if $(PDF_HTML_URL),--html-url $(PDF_HTML_URL))

# Debian's Chromium drives the browser tests (playwright never downloads a browser here), with a
# font that has Chinese glyphs for the Chinese edition (fonts-wqy-microhei, 5 MB; fonts-noto-cjk is
# ten times larger): without one Chromium draws its text as boxes (tests/book/test_chinese_search_and_interface.py).
chromium:
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }
	@fc-list :lang=zh family | grep -q . || { apt-get update -qq && apt-get install -y -qq fonts-wqy-microhei >/dev/null; }

# Debian's bubblewrap isolates each graded submission (see the instructor guide).
sandbox:
	@command -v bwrap >/dev/null || { apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null; }

unit: $(STAMP)
	$(BIN)/python -m pytest tests -m "not browser and not other_cpu" --ignore=tests/book/test_notebook_outputs.py

# The chapters' outputs against fresh runs (tests/book/test_notebook_outputs.py, nbval's comparison):
# as the machine is (the build's runs), and the student edition under tests/other_cpu.env, which
# imitates another CPU: exact outputs must not depend on low-order bits, findings must hold, and
# the hand-out must fail in its exercises' checks and nowhere else (tests/courseware/test_exercises.py).
notebooks: $(STAMP)
	$(BIN)/python -m pytest tests/book/test_notebook_outputs.py -m "not other_cpu"

notebooks-other-cpu: $(STAMP)
	$(BIN)/python tools/chapter_runs.py other-cpu --jobs 1
	$(BIN)/python -m pytest tests -m other_cpu

# nbval itself, as an instructor runs it on a notebook (NBVAL_PATHS): a run of its own.
NBVAL_PATHS ?= chapters
nbval: $(STAMP)
	$(BIN)/python -m pytest --nbval $(NBVAL_PATHS) --nbval-sanitize-with tests/nbval_sanitize.cfg

browser: book chromium
	$(BIN)/python -m pytest tests -m browser

# `make test` keeps the machine's two cores busy from start to end: tools/run_parts.py runs its
# parts (TEST_PARTS, together every test), each as `make <part>`, two at a time; whenever one ends,
# the first in the list that can start does. Every part runs and reports, and the run is red if
# any failed; each part's output is printed when it ends, closing with its 40 slowest tests.
# test-book makes the book (its runs take both cores); two parts read what it built, the HTML, the
# build's runs and myst-nb's cache (marker `built`, set in tests/conftest.py: the browser tests and
# the files it lists), the pages' tests (BUILT_PAGE_TESTS) and the others: written `part:test-book`,
# they start once it has passed, side by side. The other parts read nothing of the build, so they
# start at once, while the book is being built: the student edition's runs under
# tests/other_cpu.env then their tests (marker other_cpu), and the other tests in four parts. Run
# beside the build (TESTS_BESIDE_THE_BUILD), a test that opens the HTML, the Chinese edition, the
# book's runs, myst-nb's cache or the explorer frames fails, naming the file (tests/conftest.py),
# instead of reading a half-built book: such a test belongs in `built`.
TEST_PARTS := test-book test-built-pages:test-book test-built-others:test-book test-other-cpu \
  test-exercises test-grading test-checks-lib test-rest
test: setup chromium sandbox msgfmt
	$(BIN)/python tools/run_parts.py --jobs 2 --make "$(MAKE)" $(TEST_PARTS)

PYTEST_PART := $(BIN)/python -m pytest --durations=40
BESIDE_THE_BUILD := TESTS_BESIDE_THE_BUILD=1 $(PYTEST_PART)
# The built tests of one part (test-built-others runs the rest): the files that read the shared
# visits of the English pages and of the explorers' frames (tests/book/book_visits.py: each
# page is visited once per pytest session, so these belong in one), about 520 s of the ~860 s
# the built tests took under load; the other part makes the Chinese pages' visits again (~60 s).
BUILT_PAGE_TESTS := tests/book/test_book_html.py tests/book/test_fit.py tests/book/test_layout.py \
  tests/book/test_explorer_figures.py tests/book/test_site_weight.py
# The parts beside the build, as the shell's patterns (test-rest runs every test none of them names).
EXERCISE_TESTS := tests/courseware/test_exercise*.py
GRADING_TESTS := tests/courseware/test_grading*.py tests/courseware/test_nbgrader*.py
CHECK_AND_LIB_TESTS := tests/courseware/test_checks*.py tests/lib
.PHONY: test-book test-built-pages test-built-others test-other-cpu test-exercises test-grading test-checks-lib test-rest

test-book: $(STAMP)
	$(MAKE) --no-print-directory book

# The two parts that read the build expect it made (`make book`; in `make test`, by test-book).
test-built-pages: $(STAMP)
	$(PYTEST_PART) $(BUILT_PAGE_TESTS) -m "built"

test-built-others: $(STAMP)
	$(PYTEST_PART) tests -m "built" $(foreach path,$(BUILT_PAGE_TESTS),--ignore='$(path)')

test-other-cpu: $(STAMP)
	$(BIN)/python tools/chapter_runs.py other-cpu --jobs 1
	$(BESIDE_THE_BUILD) tests -m "other_cpu"

test-exercises: $(STAMP)
	$(BESIDE_THE_BUILD) $(EXERCISE_TESTS) -m "not built and not other_cpu"

test-grading: $(STAMP)
	$(BESIDE_THE_BUILD) $(GRADING_TESTS) -m "not built and not other_cpu"

test-checks-lib: $(STAMP)
	$(BESIDE_THE_BUILD) $(CHECK_AND_LIB_TESTS) -m "not built and not other_cpu"

# Every other test (experiments, i18n, the book's policy and packaging, and any new folder).
test-rest: $(STAMP)
	$(BESIDE_THE_BUILD) tests -m "not built and not other_cpu" \
	  $(foreach path,$(EXERCISE_TESTS) $(GRADING_TESTS) $(CHECK_AND_LIB_TESTS),--ignore-glob='$(path)')

# Instructors: the hand-out version of every chapter, and grading (SUBMISSIONS=file or folder,
# GRADE_OPTIONS e.g. "-j 2 --csv grades.csv --feedback feedback"; each submission runs in bwrap).
student: $(STAMP)
	$(BIN)/python -m courseware student --out student

grade: $(STAMP)
	$(BIN)/python -m courseware grade $(SUBMISSIONS) $(GRADE_OPTIONS)

# The coding exercises as an nbgrader course (NBGRADER_COURSE; then run nbgrader there, with $(BIN) on PATH).
.PHONY: nbgrader-course
NBGRADER_COURSE ?= _build/nbgrader-course
nbgrader-course: $(STAMP)
	$(BIN)/python -m courseware nbgrader --out $(NBGRADER_COURSE)

# A repository for students (STUDENT_REPO, a new folder) and the HTML book without solutions.
.PHONY: student-repo student-book
STUDENT_REPO ?= ../book-student
student-repo: $(STAMP)
	$(BIN)/python -m courseware student-repo $(STUDENT_REPO)

student-book: $(STAMP)
	$(BIN)/python tools/chapter_runs.py book
	rm -rf _build/student
	BOOK_EDITION=student $(BIN)/jupyter-book build . --path-output _build/student --keep-going

# Speed against the reference libraries; writes benchmarks/results.json (the Benchmarks page renders it).
# The checker tests under CHECK_SEEDS other input draws (tests/conftest.py): a wrong answer
# that a checker catches on most draws but not all shows up here, not as a flaky CI run.
CHECK_SEEDS ?= 30
check-seeds: $(STAMP)
	for seed in $$(seq 1 $(CHECK_SEEDS)); do \
	  CHECK_SEED=$$seed $(BIN)/python -m pytest -q -p no:cacheprovider tests/courseware/test_checks*.py || exit 1; done

# After `make book`: the site's size and each chapter page's transfer and load times, for the
# Benchmarks page (benchmarks/site_weight.json; rebuild the book to show them).
site-weight: book chromium
	$(BIN)/python -m benchmarks.site_weight

bench: $(STAMP)
	$(BIN)/python -m benchmarks

# _build/runs (the notebooks' runs) and _build/frame-cache (explorer frames) go too: the next
# `make book` runs and renders everything again, as on a fresh clone.
clean:
	rm -rf _build student

# Run the notebooks: JupyterLab on this machine (127.0.0.1 only; --allow-root for containers
# and CI machines, where everything runs as root), file browser in chapters/.
# Open the URL it prints; Run > Run All Cells brings each chapter's explorers to life.
lab: $(STAMP)
	$(BIN)/jupyter lab --ip=127.0.0.1 --allow-root --LabApp.default_url=/lab/tree/chapters

# The reader's pins live in requirements-runtime.txt (requirements.txt includes it).
$(STAMP): requirements-runtime.txt
