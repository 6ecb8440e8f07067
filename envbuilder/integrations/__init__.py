"""Trainers, in process (no HTTP), one module per trainer:

- ``envbuilder.integrations.trl``: ``TRLSpec(spec)`` with ``train_dataset``,
  ``environment_factory`` and ``reward_funcs`` for ``GRPOTrainer``;
- ``envbuilder.integrations.skyrl``: a ``skyrl_gym`` ``BaseTextEnv`` registered under an id
  (needs ``skyrl-gym``);
- ``envbuilder.integrations.verl``: verl's ``compute_score``, dataset rows and a multi-turn tool
  config (verl itself needs a GPU stack and is not imported);
- ``envbuilder.integrations.verifiers``: ``load_environment(spec)`` for ``vf-eval`` and prime-rl
  (needs ``verifiers``).

All drive :class:`LocalEpisode`: one episode in process under the one reward convention (only
the call that ends an episode carries its reward, so summing and last-non-null agree).
"""

from envbuilder.integrations._local import LocalEpisode

__all__ = ["LocalEpisode"]
