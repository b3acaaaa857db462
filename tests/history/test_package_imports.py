from __future__ import annotations

import grimp


def test_no_import_cycle_inside_history() -> None:
    # The registry (gatekeeper.history) opens the stores; the stores take the shared types from
    # gatekeeper.history.baseline. A store importing the registry again would close a cycle.
    graph = grimp.build_graph("gatekeeper")
    package = {m for m in graph.modules if m == "gatekeeper.history" or m.startswith("gatekeeper.history.")}
    assert {"gatekeeper.history.baseline", "gatekeeper.history.sqlite"} <= package
    cycles = []
    for importer in sorted(package):
        for imported in graph.find_modules_directly_imported_by(importer) & package:
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back and set(back) <= package:
                cycles.append((importer, *back))
    assert cycles == []
