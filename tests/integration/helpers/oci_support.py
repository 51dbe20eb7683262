"""Whether a cluster's Slurm runs tfslurm's OCI bundles (Slurm's own OCI
support: srun --container, the cluster's oci.conf), for the tests that
run a program under runtime oci on every cluster: on 23.02 and later it
runs for real (tests/compat.sh, 26.05.3), on 22.05 the submission must be
refused (docs/containers.md, "Which runtimes a cgroup setup allows")."""


def as_admin(service, method, path, body=None):
    """A request with the admin's token in site mode (service.admin), else as the tests' own."""
    admin = getattr(service, "admin", None)
    return service.request(method, path, body, {"Authorization": f"Bearer {admin}"} if admin else None)


def slurmctld_release(service):
    """(year, month) of the slurmctld the service talks to, from GET /version."""
    status, body = as_admin(service, "GET", "/version")
    assert status == 200, body
    return tuple(int(n) for n in body["slurm"]["slurmctld"].split(".")[:2])


def oci_refused_here(service, spec, status, body):
    """Whether the cluster runs a Slurm whose OCI support cannot run the
    attempt's bundle (22.05: it replaces root.path, one task per node), and
    then that the submission was refused naming container.runtime, with
    nothing stored. The OCI tests run for real on 26.05.3 (tests/compat.sh)."""
    if slurmctld_release(service) >= (23, 2):
        return False
    assert status == 400, body
    assert [f["field"] for f in body["error"]["fields"]] == ["container.runtime"], body
    assert "23.02 or later" in body["error"]["fields"][0]["reason"], body
    assert as_admin(service, "GET", f"/experiments/{spec['id']}")[0] == 404, "nothing stored"
    return True
