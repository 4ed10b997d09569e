package manifests_test

import (
	"log/slog"
	"path/filepath"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	promqlparser "github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	"github.com/bootimage-operator/bootimage-operator/manifests"
)

// manifestsDir holds the shipped manifests, relative to this module.
var manifestsDir = filepath.Join("..", "..", "manifests")

// TestAlertRulesParse checks the shipped PrometheusRule with Prometheus's own rule file parser:
// every expression parses and every alert has a severity, a summary and a description.
func TestAlertRulesParse(t *testing.T) {
	var rules int
	for _, obj := range objectsIn(t, manifests.MetricsFile) {
		rule, ok := obj.(*monitoringv1.PrometheusRule)
		if !ok {
			continue
		}
		ruleFile, err := yaml.Marshal(rule.Spec)
		if err != nil {
			t.Fatal(err)
		}
		promql := promqlparser.NewParser(promqlparser.Options{})
		groups, errs := rulefmt.Parse(ruleFile, false, model.LegacyValidation, promql, slog.Default())
		if len(errs) > 0 {
			t.Fatalf("PrometheusRule %s: %v", rule.Name, errs)
		}
		for _, group := range groups.Groups {
			for _, r := range group.Rules {
				rules++
				if _, ok := r.Labels["severity"]; !ok {
					t.Errorf("alert %s has no severity label", r.Alert)
				}
				for _, key := range []string{"summary", "description"} {
					if r.Annotations[key] == "" {
						t.Errorf("alert %s has no %s annotation", r.Alert, key)
					}
				}
				if _, err := promql.ParseExpr(r.Expr); err != nil {
					t.Errorf("alert %s: %v", r.Alert, err)
				}
			}
		}
	}
	if rules == 0 {
		t.Fatal("no alerts in " + manifests.MetricsFile)
	}
}
