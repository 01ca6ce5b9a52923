"""Sphinx extension for the book: what every built page loads, served offline and kept light.

* Copies the part of MathJax 3 the book uses (shipped on PyPI by ``django-static-mathjax``
  as the ``mathjax`` package) into ``_static/mathjax``, so ``mathjax_path`` in
  ``_config.yml`` points at a local file and the built book typesets maths with no
  network: the ``tex-chtml`` bundle, the TeX extensions it may autoload, its CHTML fonts
  and what its menu loads on demand (accessibility, English speech rules). The other
  bundles, SVG output and speech rules of other languages (about 20 MB) stay out.
  A missing MathJax fails the build at start-up, not after a long build.
* Replaces pydata-sphinx-theme's ``fontawesome.js`` (1.5 MB on every page, there "so
  that users can add custom icons") by an empty script: the book adds none, and the
  theme's CSS already draws every icon with Font Awesome's web fonts. Source maps
  (``*.map``, for debugging the themes' scripts) and the theme's message catalogues
  (``_static/locales``, read only while building) are left out of the build too.
* Loads ``_static/book-nav.js`` deferred: Jupyter Book adds every file of ``_static/``
  (``book.css`` too) as a plain script, and that one must run after the page is parsed
  but before the theme's own deferred scripts (sidebar toggles at every width).
* Drops sphinx-thebe's scripts, which Jupyter Book always adds: the book launches
  Binder instead, and those scripts name a CDN and are registered twice per page
  (a console error in every browser).
"""
import shutil
from pathlib import Path


def _mathjax_dir() -> Path:
    import mathjax  # the django-static-mathjax distribution

    source = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    if not (source / "tex-chtml.js").is_file():
        raise RuntimeError(f"MathJax's es5 build was not found at {source}; reinstall django-static-mathjax")
    return source


NAV_SCRIPT = "book-nav.js"

# Paths inside MathJax's es5 folder that the book requests, or that the MathJax menu may request.
MATHJAX_FILES = (
    "tex-chtml.js",  # mathjax_path: TeX input, CHTML output, menu
    "input/tex/extensions",  # autoloaded by TeX macros that are not in the bundle
    "output/chtml/fonts/woff-v2",  # the CHTML fonts
    "ui",  # the menu's lazy parts
    "a11y",  # the menu's accessibility options
    "sre/mathmaps/base.json",  # speech rules that the explorer loads: common part,
    "sre/mathmaps/en.json",  # English
    "sre/mathmaps/nemeth.json",  # and Nemeth braille
)


def _copy_mathjax(app, exception):
    if exception is None and app.builder.format == "html":
        source, target = _mathjax_dir(), Path(app.outdir) / "_static" / "mathjax"
        for name in MATHJAX_FILES:
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            if (source / name).is_dir():
                shutil.copytree(source / name, target / name, dirs_exist_ok=True)
            else:
                shutil.copy2(source / name, target / name)


def _lighten_theme(app, exception):
    if exception is None and app.builder.format == "html":
        static = Path(app.outdir) / "_static"
        (static / "scripts" / "fontawesome.js").write_text(
            "/* Empty: the book's icons come from the theme's CSS web fonts (_ext/page_assets.py). */\n"
        )
        for source_map in static.rglob("*.map"):
            source_map.unlink()
        # sphinx-book-theme's message catalogues: Sphinx reads them while building, a browser never does.
        shutil.rmtree(static / "locales", ignore_errors=True)


def _defer_nav_script(app, config):
    config.html_js_files = [
        (NAV_SCRIPT, {"defer": "defer"}) if entry == NAV_SCRIPT else entry for entry in config.html_js_files
    ]


def _is_thebe(script) -> bool:
    return "thebe" in (script.filename or "") or "THEBE_JS_URL" in script.attributes.get("body", "")


def _drop_thebe(app, pagename, templatename, context, doctree):
    context["script_files"] = [js for js in context.get("script_files", []) if not _is_thebe(js)]


def setup(app):
    source = _mathjax_dir()  # fail at start-up, not after a long build, when MathJax is missing
    missing = [name for name in MATHJAX_FILES if not (source / name).exists()]
    if missing:
        raise RuntimeError(f"MathJax at {source} lacks {missing}; reinstall django-static-mathjax")
    app.connect("config-inited", _defer_nav_script)
    app.connect("build-finished", _copy_mathjax)
    app.connect("build-finished", _lighten_theme)
    app.connect("html-page-context", _drop_thebe)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
