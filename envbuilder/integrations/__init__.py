"""Trainers, in process (no HTTP), one module per trainer:

- ``envbuilder.integrations.trl``: ``TRLSpec(spec)`` with ``train_dataset``,
  ``environment_factory`` and ``reward_funcs`` for ``GRPOTrainer``;
- ``envbuilder.integrations.skyrl``: a ``skyrl_gym`` ``BaseTextEnv`` registered under an id
  (needs ``skyrl-gym``);
- ``envbuilder.integrations.verl``: verl's ``compute_score``, dataset rows and a multi-turn tool
  config (verl itself needs a GPU stack and is not imported);
- ``envbuilder.integrations.verifiers``: ``load_environment(spec)`` for ``vf-eval`` and prime-rl
  (needs ``verifiers``).

``export_verifiers(spec, out)`` writes a spec as a verifiers environment package (``pip install
OUT/``, then ``vf-eval NAME``; installing it needs ``verifiers``, writing it does not), and
``export_harbor(spec, out)`` writes its tasks as Harbor task directories.

All drive :class:`LocalEpisode`: one episode in process under the one reward convention (only
the call that ends an episode carries its reward, so summing and last-non-null agree).
"""

from envbuilder.integrations._harbor import HarborExport, export_harbor
from envbuilder.integrations._local import LocalEpisode
from envbuilder.integrations._vf_package import VerifiersPackage, export_verifiers

__all__ = ["HarborExport", "LocalEpisode", "VerifiersPackage", "export_harbor", "export_verifiers"]
