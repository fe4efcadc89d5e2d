# Filters of status.yml's report play (playbooks/plays/report.yml): the status of a
# training cluster as data (plugin_utils/report/status_doc.py, schema docs/status.schema.json).
from __future__ import annotations

from ansible_collections.mtslime.posttrain.plugins.plugin_utils.report import status_doc


def slime_status(job, progress=None, checkpoint=None, manifest=None, cluster=None, head=None, experiment=None,
                 log_file=None, save_dir=None, tensorboard=None, report=None, containers=None, supervisor=None,
                 supervised=False):
    """One cluster's status from the registered results of ray_job (state=status), train_progress,
    mcore_checkpoint (expect=training) and the slurped manifest; containers: {node: state of its training
    container} (playbooks/plays/container_state.yml); supervisor: the slurped state.json of the supervisor when
    `supervised`."""
    return status_doc.cluster_status(job=job, progress=progress, checkpoint=checkpoint, manifest=manifest,
                                     cluster=cluster, head=head, experiment=experiment, log_file=log_file,
                                     save_dir=save_dir, tensorboard=tensorboard, report=report,
                                     containers=containers,
                                     supervisor=status_doc.supervisor_part(supervisor, supervised))


def slime_status_document(clusters, generated_at=None):
    """status.json: {schema_version, generated_at, clusters}."""
    return status_doc.document(clusters, generated_at)


def slime_tensorboard(log_dir, port=6006, container=None, ssh_host=None, ssh_user=None, ssh_port=None):
    """The command that serves the guide's TensorBoard logs on the head, and the SSH tunnel to it."""
    return status_doc.tensorboard_part(log_dir, port, container, ssh_host, ssh_user, ssh_port)


class FilterModule:
    def filters(self):
        return {
            "slime_status": slime_status,
            "slime_status_document": slime_status_document,
            "slime_tensorboard": slime_tensorboard,
        }
