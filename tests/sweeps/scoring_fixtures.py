"""Scorers named as ``module:function`` by the tests."""


def half_credit(output, target, sample):
    return 0.5 if str(target) in output else 0


def out_of_range(output, target, sample):
    return 7
