# BroRL companion, the smoke profile: what smoke/<arm>/launch.sh sets besides its arm.
RUN_DIR_DEFAULT=data/runs/verl/smoke
export VERL_USE_EXTERNAL_MODULES=brorl_lib.verl_recipe.tokenizer_fallback  # verl imports it in every process
RAY_ENV="VERL_USE_EXTERNAL_MODULES"
