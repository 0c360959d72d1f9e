import numpy as np
import pytest

from tokenpace.core.workload.lengths import LengthSpecError, parse_length


@pytest.mark.parametrize(
    ("spec", "kind"),
    [
        ("512", "fixed"),
        ("256:1024", "uniform"),
        ("normal:512,128", "normal"),
        ("lognormal:512,0.5", "lognormal"),
        ("128,512,2048", "mix"),
        ("128@3,2048@1", "mix"),
    ],
)
def test_forms(spec, kind):
    d = parse_length(spec)
    assert d.kind == kind
    values = d.sample(np.random.default_rng(0), 4000)
    assert values.min() >= 1
    assert abs(values.mean() - d.mean) / d.mean < 0.05


def test_range_is_inclusive_and_mix_uses_only_its_bins():
    rng = np.random.default_rng(0)
    assert set(parse_length("3:5").sample(rng, 500)) == {3, 4, 5}
    weighted = parse_length("128@3,2048@1").sample(rng, 4000)
    assert set(weighted) == {128, 2048}
    assert abs((weighted == 128).mean() - 0.75) < 0.03


def test_same_seed_same_lengths():
    d = parse_length("normal:512,128")
    a = d.sample(np.random.default_rng(7), 10)
    b = d.sample(np.random.default_rng(7), 10)
    assert (a == b).all()


@pytest.mark.parametrize("spec", ["", "abc", "0", "-5", "10:5", "1:2:3", "normal:5", "normal:a,b", "128,x"])
def test_bad_specs_are_refused_with_a_message(spec):
    with pytest.raises(LengthSpecError) as err:
        parse_length(spec)
    assert str(err.value)
