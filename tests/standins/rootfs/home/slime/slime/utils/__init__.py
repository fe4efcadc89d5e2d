"""Stand-in for slime.utils (real: THUDM/slime slime/utils/)."""
