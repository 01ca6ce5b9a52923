"""tools/i18n.py update: what babel's merge gets wrong is put right."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import i18n  # noqa: E402  (tools/ is not a package)


def test_a_message_marked_no_python_format_loses_the_python_format_babel_added(tmp_path):
    catalogue = tmp_path / "page.po"
    catalogue.write_text('#, no-python-format, python-brace-format, python-format\nmsgid "15% of {n}"\nmsgstr "{n} 的 15%"\n\n'
                         '#, python-format\nmsgid "%d tokens"\nmsgstr "%d 个词元"\n', encoding="utf-8")
    i18n.keep_no_python_format(catalogue)
    assert catalogue.read_text(encoding="utf-8").splitlines()[0] == "#, no-python-format, python-brace-format"
    assert "#, python-format\nmsgid \"%d tokens\"" in catalogue.read_text(encoding="utf-8")
