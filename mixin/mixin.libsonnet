// storpath monitoring mixin: alerts, recording rules and dashboards for kube-prometheus,
// kube-prometheus-stack or any Prometheus that takes jsonnet-rendered rules. Vendor it with
// jsonnet-bundler (this folder is the package; it imports nothing outside it):
//
//   jb install github.com/storpath/storpath/mixin@main
//
//   local storpath = (import 'github.com/storpath/storpath/mixin/mixin.libsonnet') + {
//     _config+:: { targetSelector: 'job="storpath-exporter"', zfsCapacityWarningRatio: 0.8 },
//   };
//   storpath.prometheusAlerts, storpath.prometheusRules, storpath.grafanaDashboards
//
// The rules are generated (mixin/generate.py) from the same definitions as rules/*.yml, the
// dashboards by the code that writes dashboards/*.json; with the default _config, ruleFiles
// evaluates to exactly those rule files and grafanaDashboards to those boards. Every threshold,
// `for:`, severity and selector is a key of _config (config.libsonnet, with the reason for each
// value), and the boards follow it too: the thresholds they draw and name, the runbook base of
// their links, the windows of their panels, the selector of their job variable
// (dashboardsJobSelector).
local generated = import 'generated/rules.libsonnet';

(import 'config.libsonnet') + {
  local files = $.ruleFiles,
  local groups(kind) = [
    group { rules: [rule for rule in group.rules if std.objectHas(rule, kind)] }
    for file in std.objectFields(files)
    for group in files[file].groups
  ],

  // {name: rule file}, as rules/<name> (`jsonnet -m DIR -e '(import "mixin.libsonnet").ruleFiles'`).
  ruleFiles:: generated.ruleFiles($._config),

  prometheusAlerts+:: {
    groups+: [group for group in groups('alert') if group.rules != []],
  },

  // Recording rules in groups of their own (`<group>.rules`), as mixins keep them.
  prometheusRules+:: {
    groups+: [group { name: group.name + '.rules' } for group in groups('record') if group.rules != []],
  },

  // {file name: dashboard}: dashboards/*.json with the default _config.
  grafanaDashboards+:: (import 'generated/dashboards.libsonnet').dashboards($._config),
}
