# BroRL companion, the cluster profile: what every arm's launch.sh in brorl/ and prorl/ sets besides its arm.
RUN_DIR_DEFAULT=data/runs/verl/brorl-repro
export VERL_USE_EXTERNAL_MODULES=brorl_lib.verl_recipe.tokenizer_fallback  # verl imports it in every process
RAY_ENV="VERL_USE_EXTERNAL_MODULES"
