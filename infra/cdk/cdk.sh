#!/usr/bin/env bash
# The CDK CLI (infra/cdk/package.json) as `make synth`, `make diff` and `make deploy` run it:
#
#   infra/cdk/cdk.sh synth  ASSEMBLY [-c key=value ...]   the app (cdk.json's "app") synthesized into ASSEMBLY
#   infra/cdk/cdk.sh diff   ASSEMBLY [cdk diff flags]     what deploying ASSEMBLY would change in the account
#   infra/cdk/cdk.sh deploy ASSEMBLY [cdk deploy flags]   ASSEMBLY deployed, exactly as synthesized
#
# The settings are CDK context, and context takes effect only in the synth: the CLI merges cdk.json's context
# with the -c pairs (which win), hands them to the app with the account and region of the caller's
# credentials (if any), and the app refuses an unknown key or a bad value. So synth takes -c pairs and nothing
# else, and diff and deploy refuse -c: given to an assembly already synthesized, it would change nothing.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

die() {
  printf 'cdk.sh: %s\n' "$*" >&2
  exit 2
}

# Refuses every argument but -c key=value (also --context key=value, --context=key=value).
context_only() {
  while [ $# -gt 0 ]; do
    case "$1" in
      -c | --context)
        [ $# -ge 2 ] && [[ "$2" == [!=]*=* ]] || die "$1 takes key=value (got '${2:-}')"
        shift 2
        ;;
      --context=[!=]*=*) shift ;;
      *)
        die "CDK_ARGS takes settings only, as -c key=value (got '$1'). The account and region are those of" \
          "your credentials (AWS_PROFILE, AWS_REGION); flags of cdk diff and cdk deploy go in DIFF_ARGS and" \
          "DEPLOY_ARGS."
        ;;
    esac
  done
}

# Refuses context in the arguments of cdk diff or deploy ($1): on a synthesized assembly it changes nothing.
no_context() {
  local command="$1"
  shift
  for argument in "$@"; do
    case "$argument" in
      -c | -c?* | --context | --context=*)
        die "'$argument' would change nothing: cdk $command takes the assembly make synth wrote, as it" \
          "is. Give settings to the synth as CDK_ARGS=\"-c key=value\" (make diff and make deploy" \
          "synthesize first)."
        ;;
    esac
  done
}

# The CDK CLI, run in this directory (cdk.json), installed from package.json the first time.
cdk() {
  [ -x "$HERE/node_modules/.bin/cdk" ] || (cd "$HERE" && npm install --no-save --no-audit --no-fund --silent)
  (cd "$HERE" && exec node_modules/.bin/cdk "$@")
}

# One line naming the assembly's stacks and the environment each is bound to.
describe_assembly() {
  node -e '
    const manifest = require(process.argv[1] + "/manifest.json");
    const stacks = Object.entries(manifest.artifacts || {})
      .filter(([, artifact]) => artifact.type === "aws:cloudformation:stack")
      .map(([id, artifact]) => `${artifact.displayName || id} (${artifact.environment})`);
    console.log(`cdk.sh: ${process.argv[1]} holds ${stacks.join(", ")}`);
  ' "$1"
}

[ $# -ge 2 ] || die "usage: cdk.sh synth|diff|deploy ASSEMBLY [arguments]"
command="$1"
assembly="$2"
shift 2
case "$assembly" in
  /*) ;;
  *) assembly="$PWD/$assembly" ;;
esac

case "$command" in
  synth)
    context_only "$@"
    if [ -e "$assembly" ]; then
      [ -f "$assembly/manifest.json" ] || die "$assembly is not a cloud assembly: not replacing it"
      rm -rf "$assembly" # a previous synth's templates and staged assets
    fi
    cdk synth --quiet --output "$assembly" "$@"
    describe_assembly "$assembly"
    ;;
  diff | deploy)
    no_context "$command" "$@"
    [ -f "$assembly/manifest.json" ] || die "no cloud assembly in $assembly: make synth writes it"
    describe_assembly "$assembly"
    cdk "$command" --app "$assembly" "$@"
    ;;
  *) die "usage: cdk.sh synth|diff|deploy ASSEMBLY [arguments]" ;;
esac
