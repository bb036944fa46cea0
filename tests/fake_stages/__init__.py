"""Fake stages for build-graph tests: the real stage API (docs/CONTRACTS.md) without the compiler.

parse drops positions like the real one, so comment edits cut off after parse; ttir rejects
`with` by AST node id, like later real stages do; ttgir writes the module attributes the
metadata task reads. With $TTBUILD_FAKE_RUNLOG set, every run() appends its stage name there
(tests count executions); $TTBUILD_FAKE_DELAY (seconds) slows each run() so a test can kill a
build midway. Tests pass the package by name: `namespace(..., stage_package="fake_stages")`,
`ttbuild.cli.main(argv, stage_package="fake_stages")`, with tests/ on the path.
"""
