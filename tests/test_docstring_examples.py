"""Every public estimator's class docstring has the numpydoc sections ``Parameters``, ``Attributes`` and
``Examples``, and its examples run (``doctest``), without a warning of the package's own.

The public classes are resolved through ``asyos`` (``asyos.__all__``: every class there that is not an
exception); the registry's estimators (``asyos.registry.all_algorithms``) must all be among them, so
that a new estimator without documentation fails here.
"""
import doctest
import inspect
import warnings

import pytest

import asyos
from asyos.errors import ConvergenceWarning
from asyos.registry import all_algorithms, public_names

SECTIONS = ("Parameters", "Attributes", "Examples")
OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def public_classes():
    """The names of ``asyos.__all__`` that are classes and not exceptions (``InputError``)."""
    names = []
    for name in asyos.__all__:
        obj = getattr(asyos, name)
        if inspect.isclass(obj) and not issubclass(obj, BaseException):
            names.append(name)
    return sorted(names)


CLASSES = public_classes()


def test_the_checked_classes_cover_every_estimator():
    assert CLASSES, "no public class found in asyos.__all__"
    registered = {spec.estimator_class.__name__: spec.estimator_class for spec in all_algorithms()}
    assert registered, "the registry lists no algorithm"
    missing = sorted(set(registered) - set(CLASSES))
    assert not missing, f"registered estimators missing from the checked classes: {missing}"
    for name, cls in registered.items():
        assert getattr(asyos, name) is cls, f"asyos.{name} is not the registry's {cls!r}"
    helpers = sorted(set(public_names()) - set(CLASSES))
    assert not helpers, f"public classes of the families not checked: {helpers}"


def sections(doc):
    """``{section title: position}`` of the numpydoc headers (a title line underlined by as many dashes)."""
    lines = inspect.cleandoc(doc or "").splitlines()
    return {line: i for i, (line, under) in enumerate(zip(lines, lines[1:]))
            if line in SECTIONS and under == "-" * len(line)}


@pytest.mark.parametrize("name", CLASSES)
def test_numpydoc_sections(name):
    cls = getattr(asyos, name)
    found = sections(cls.__doc__)
    missing = [title for title in SECTIONS if title not in found]
    assert not missing, f"{name}'s class docstring lacks the section(s) {missing}"
    order = sorted(found, key=found.get)
    assert order == list(SECTIONS), f"{name}'s sections are in the order {order}; numpydoc's is {list(SECTIONS)}"


@pytest.mark.parametrize("name", CLASSES)
def test_docstring_examples_run(name):
    cls = getattr(asyos, name)
    tests = [t for t in doctest.DocTestFinder(recurse=False).find(cls, name, globs={}) if t.examples]
    assert tests, f"{name}'s class docstring has no example (>>>)"
    runner = doctest.DocTestRunner(optionflags=OPTIONS)
    report = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        failed = sum(runner.run(test, out=report.append).failed for test in tests)
    assert failed == 0, f"{name}'s docstring examples failed:\n" + "".join(report)
    ours = [f"{w.category.__name__}: {w.message}" for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert not ours, f"{name}'s docstring examples warn (show a model that is not suspect):\n" + "\n".join(ours)
