#!/usr/bin/env bash
# promtool check rules + promtool test rules on dashboards/alerts.yaml.
#   alert_rules_test.sh DASHBOARDS_DIR
set -euo pipefail
cd "$1"
promtool check rules alerts.yaml
promtool test rules alerts_test.yaml
