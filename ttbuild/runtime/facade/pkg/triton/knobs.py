"""`triton.knobs` of the façade: the launch hooks (`runtime.launch_enter_hook` / `launch_exit_hook`, Triton 3.6's HookChain) that served launches call."""


class HookChain:
    """Hooks called in order (reversed for an exit chain), as triton.knobs.HookChain."""

    def __init__(self, reversed=False):
        self.calls = []
        self.reversed = reversed

    def add(self, func):
        if func not in self.calls:
            self.calls.append(func)

    def remove(self, func):
        if func in self.calls:
            self.calls.remove(func)

    def __call__(self, *args, **kwargs):
        for call in (reversed(self.calls) if self.reversed else self.calls):
            call(*args, **kwargs)


class runtime_knobs:
    launch_enter_hook = HookChain()
    launch_exit_hook = HookChain(reversed=True)


runtime = runtime_knobs()
