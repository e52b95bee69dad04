"""Test package. Loading the hypothesis profile here applies it to every property test."""

from tests.support import hypothesis_profiles as hypothesis_profiles
