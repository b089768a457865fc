"""The invariants, each a small function of an
:class:`~harness.world.observation.Observation` and the
:class:`~properties.ledger.Ledger` (I4: of two observations).

They are plain functions, grouped by what they protect, so that tests can
feed them a deliberately broken world and watch them fire. Each raises
:class:`~properties.violation.Broken`; :mod:`properties.catalog` says which
property each one is.
"""
