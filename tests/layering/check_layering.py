#!/usr/bin/env python3
"""Checks the layering of docs/design.md: a lower layer never includes a higher one,
and third-party RDMA/PMIx/MPI headers stay inside their own component."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
# Layer of each module; a file may include modules of a lower or equal rank,
# but datatype and bootstrap (both rank 1) must not include each other.
RANK = {"base": 0, "datatype": 1, "bootstrap": 1, "transport/fabric": 2,
        "transport/memory": 3, "transport/messaging": 4, "collectives": 5, "mpi": 6}
# Public headers belong to the module that implements them.
PUBLIC = {"status.h": "base", "deadline.h": "base", "datatype.h": "datatype",
          "store.h": "bootstrap", "fabric.h": "transport/fabric", "memory.h": "transport/memory",
          "messaging.h": "transport/messaging", "collectives.h": "collectives",
          "ibdt.h": "mpi"}
THIRD_PARTY = {"mpi.h": "mpi", "infiniband/verbs.h": "transport/fabric/verbs",
               "rdma/rdma_cma.h": "transport/fabric/verbs", "pmix.h": "bootstrap/pmix"}

def module_of(rel: str):
    for name in sorted(RANK, key=len, reverse=True):
        if rel == name or rel.startswith(name + "/"):
            return name
    if rel.startswith("include/ibdt/"):
        return PUBLIC.get(rel[len("include/ibdt/"):])
    return None

errors = []
include_re = re.compile(r'#\s*include\s*[<"]([^">]+)[">]')
for path in list(root.rglob("*.h")) + list(root.rglob("*.cc")):
    rel = path.relative_to(root).as_posix()
    if rel.startswith(("build", "tests/", "perf/", "tools/")):
        continue
    mine = module_of(rel)
    if mine is None:
        continue
    for line in path.read_text(errors="replace").splitlines():
        m = include_re.match(line.strip())
        if not m:
            continue
        target = m.group(1)
        owner = THIRD_PARTY.get(target)
        if owner is not None and not rel.startswith(owner + "/") and not rel.startswith(owner):
            errors.append(f"{rel}: includes <{target}>, which only {owner}/ may include")
        other = module_of(target) if not target.startswith("ibdt/") else PUBLIC.get(target[5:])
        if other is None or other == mine:
            continue
        if RANK[other] > RANK[mine] or (RANK[other] == RANK[mine]):
            errors.append(f"{rel} ({mine}) includes {target} ({other}): higher or sibling layer")
# The core never depends on MPI: no core module's build names an MPI
# library, wrapper or the bridge (mpi/ builds one bridge per MPI on top).
mpi_in_build = re.compile(r"\bmpi\b|MPICXX|MPIEXEC|ibdt_mpi|\bMPI::", re.IGNORECASE)
for module in ("base", "datatype", "bootstrap", "transport", "collectives"):
    for cmake in (root / module).rglob("CMakeLists.txt"):
        for number, line in enumerate(cmake.read_text(errors="replace").splitlines(), 1):
            if mpi_in_build.search(line.split("#")[0]):
                errors.append(f"{cmake.relative_to(root)}:{number}: the core build mentions MPI")
for e in errors:
    print(e)
print(f"layering: {len(errors)} violation(s)")
sys.exit(1 if errors else 0)
