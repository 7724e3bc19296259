"""benchmarks/ssh_costs.py's figures: one percentile rule (nearest rank)
for the median and the p90.  Before, the median was statistics.median
(the mean of the two middle values) and the p90 the value of rank
int(0.9 n), so ``--quick`` (two connections) printed the smaller value
as the p90, below the median."""

import pytest

from benchmarks import ssh_costs


@pytest.mark.parametrize('values', [
    [0.2, 0.1], [0.3, 0.1, 0.2], [0.05] * 4, [0.4, 0.1, 0.3, 0.2],
    [i / 1000 for i in range(200, 0, -1)]])
def test_the_median_is_never_above_the_p90(values):
    line = ssh_costs._ms(values)
    median, p90 = (float(word) for word in line.split() if word[0].isdigit())
    assert median <= p90
    assert p90 <= max(values) * 1000


def test_nearest_rank():
    values = [5, 1, 4, 2, 3, 10, 9, 8, 7, 6]
    assert [ssh_costs.percentile(values, p) for p in (0, 10, 11, 50, 90,
                                                      91, 100)] == \
        [1, 1, 2, 5, 9, 10, 10]
    assert ssh_costs.percentile([0.2, 0.1], 50) == 0.1
    assert ssh_costs.percentile([0.2, 0.1], 90) == 0.2
    assert ssh_costs.percentile([7], 90) == 7
