// storpath monitoring mixin: alerts, recording rules and dashboards for kube-prometheus,
// kube-prometheus-stack or any Prometheus that takes jsonnet-rendered rules.
//
//   local storpath = (import 'storpath/mixin/mixin.libsonnet') + {
//     _config+:: { targetSelector: 'job="storpath-exporter"', zfsCapacityWarningRatio: 0.8 },
//   };
//   storpath.prometheusAlerts, storpath.prometheusRules, storpath.grafanaDashboards
//
// The rules are generated (mixin/generate.py) from the same definitions as rules/*.yml; with
// the default _config, ruleFiles evaluates to exactly those files. Every threshold, `for:`,
// severity and selector is a key of _config (config.libsonnet, with the reason for each value).
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

  grafanaDashboards+:: import 'generated/dashboards.libsonnet',
}
