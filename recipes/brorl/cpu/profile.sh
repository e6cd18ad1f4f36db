# BroRL companion, the cpu profile: what cpu/<arm>/launch.sh sets besides its arm.
RUN_DIR_DEFAULT=data/runs/verl/verl-cpu
# TensorBoard's event files (binary, not the same bytes run to run) stay out of the committed run, under build/
TENSORBOARD_ROOT=build/tensorboard/verl-cpu
# verl on this CPU: the plugin serves the one logical GPU from the CPU, and verl imports both modules in every process
export VERL_USE_EXTERNAL_MODULES=brorl_lib.verl_recipe.cpu.plugin,brorl_lib.verl_recipe.tokenizer_fallback
export VERL_PLATFORM=cpu VERL_ENGINE_DEVICE=cuda
RAY_ENV="VERL_USE_EXTERNAL_MODULES VERL_PLATFORM VERL_ENGINE_DEVICE"
