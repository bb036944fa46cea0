"""ttbuild's static reader of Python: a project's module-level code and decorator arguments, evaluated from the ast, bounded.

Nothing is imported or run. Standard library only: no import of ttbuild.frontend, runtime or graph."""
