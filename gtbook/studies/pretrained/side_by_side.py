r"""Chapter 5's two trainings at once: the ViT in this process, the ModernBERT in a child process.

Each training runs on one thread (``TRAIN_THREADS``, which keeps it deterministic), so trained one after
the other they leave a core idle. :func:`train_side_by_side` runs them together. It lives apart from
:mod:`~gtbook.studies.pretrained.training` because that module's source is part of every trained
model's cache key, and how the two trainings share the machine changes no weight.

The child never outlives the call: if this process's training fails or is interrupted, the child is
killed at once; if the child dies (killed, out of memory), the call raises once the ViT's training is
done, instead of waiting for ever; and if this process is killed outright (``kill -9`` of a kernel), the
kernel's parent-death signal kills the child too (Linux; elsewhere the child trains on until it tries
to send its model).
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import traceback
from multiprocessing.connection import Connection

from gtbook.processes import die_with_parent
from gtbook.studies.pretrained import training
from gtbook.studies.pretrained.training import Schedule, TrainedModel

__all__ = ["train_side_by_side"]


def _sendable(exc: BaseException) -> BaseException:
    """``exc`` if it survives a pickle round trip (some exceptions pickle but do not unpickle), else a
    RuntimeError with its text."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # noqa: BLE001 - any exception that does not travel is sent as its text
        return RuntimeError(repr(exc))
    return exc


def _train_in_child(mlm: Schedule, send: Connection, parent: int) -> None:
    """The child's work: train the ModernBERT and send ``(True, model)``, or ``(False, error, traceback)``."""
    die_with_parent(signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the signal was armed
        return
    try:
        # plain pickle, by value: torch's reducers for multiprocessing would share the tensors' memory
        # through this process, which exits once it has sent
        data = pickle.dumps((True, training.train_modernbert_mlm(mlm)))
    except BaseException as exc:  # noqa: BLE001 - sent to the parent, which raises it
        data = pickle.dumps((False, _sendable(exc), traceback.format_exc()))
    send.send_bytes(data)
    send.close()


def train_side_by_side(vit: Schedule, mlm: Schedule, *, progress: bool = False) -> tuple[TrainedModel, TrainedModel]:
    r""":func:`~gtbook.studies.pretrained.training.train_vit_digits` and
    :func:`~gtbook.studies.pretrained.training.train_modernbert_mlm` at the same time, on two cores.

    The ModernBERT trains in a child process (``spawn``) while the ViT trains in this one: the same code
    on the same single thread, so the same weights (``tests/studies/test_pretrained_training.py`` compares them
    with an in-process training). Either model found in the cache is loaded, not trained.

    Parameters
    ----------
    vit, mlm : Schedule
        The ViT's (:func:`~gtbook.studies.pretrained.training.vit_schedule`) and the ModernBERT's
        (:func:`~gtbook.studies.pretrained.training.mlm_schedule`) schedules.
    progress : bool
        A bar over the ViT's steps (the child's training shows none).

    Returns
    -------
    (TrainedModel, TrainedModel)
        The ViT, then the ModernBERT.

    Raises
    ------
    RuntimeError
        When the child dies before it sends its model (found once the ViT's training is done). An
        exception in the child's training is raised here, with the child's traceback as its cause.
    """
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(
        target=_train_in_child, args=(mlm, send, os.getpid()), name="gtbook-modernbert-training", daemon=True
    )
    try:
        child.start()
        send.close()  # the child holds the only sending end now: if it dies, receiving raises EOFError
        first = training.train_vit_digits(vit, progress=progress)
        try:
            message = pickle.loads(receive.recv_bytes())
        except EOFError:
            child.join()
            raise RuntimeError(
                f"the ModernBERT's training process died (exit code {child.exitcode}) before it sent its model"
            ) from None
        if not message[0]:
            raise message[1] from RuntimeError(f"in the ModernBERT's training process:\n{message[2]}")
        return first, message[1]
    finally:
        send.close()
        if child.pid is not None:  # started
            if child.is_alive():
                child.kill()
            child.join()
        receive.close()
