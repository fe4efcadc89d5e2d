"""Stand-in for the slime package (real: THUDM/slime, MT fork branch dev/fb42ae4-musa-patch in
the MT image). Test image only."""
__version__ = "0.3.1+musa.standin"
