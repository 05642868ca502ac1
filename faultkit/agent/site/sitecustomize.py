"""faultkit's agent, placed on PYTHONPATH by `faultkit capture` (this folder holds nothing else).

Python imports `sitecustomize` at start-up, so every Python process of the target (and every worker
it spawns, forks or starts with the same environment) runs the agent before its own code. The agent
is loaded by file path: nothing is added to the target's sys.path. Then the target's own
`sitecustomize`, if another folder on sys.path has one, runs as it would have without faultkit.
"""


def _faultkit_agent():
    try:
        import importlib.util
        import os
        import sys
        here = os.path.dirname(os.path.abspath(__file__))
        path = os.path.join(os.path.dirname(here), "runtime.py")
        spec = importlib.util.spec_from_file_location("_faultkit_agent_runtime", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules["_faultkit_agent_runtime"] = mod
        spec.loader.exec_module(mod)
        mod.start()
    except BaseException:
        pass           # never the target's problem; runtime.start records its own failures


def _chain():
    """The next `sitecustomize` on sys.path, run as `sitecustomize` (its errors reach site.py, which
    reports them as it always does)."""
    import importlib.machinery
    import importlib.util
    import os
    import sys
    here = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))
    rest = [p for p in sys.path if os.path.realpath(p or os.getcwd()) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = mod
    spec.loader.exec_module(mod)


_faultkit_agent()
_chain()
