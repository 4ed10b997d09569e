package manifests_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	promqlparser "github.com/prometheus/prometheus/promql/parser"
	corev1 "k8s.io/api/core/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/internal/controllers"
	"github.com/bootimage-operator/bootimage-operator/manifests"
)

// dashboardPanel is what the console reads of a Grafana panel.
type dashboardPanel struct {
	Type    string `json:"type"`
	ID      int    `json:"id"`
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"`
}

// shippedDashboard returns the shipped dashboard's ConfigMap and its panels, rows flattened.
func shippedDashboard(t *testing.T) (*corev1.ConfigMap, string, []dashboardPanel) {
	t.Helper()
	objs := objectsIn(t, manifests.DashboardFile)
	if len(objs) != 1 {
		t.Fatalf("%s: %d objects, want one ConfigMap", manifests.DashboardFile, len(objs))
	}
	cm, ok := objs[0].(*corev1.ConfigMap)
	if !ok || len(cm.Data) != 1 {
		t.Fatalf("%s: want a ConfigMap with one dashboard, have %T", manifests.DashboardFile, objs[0])
	}
	var board struct {
		Title string           `json:"title"`
		Rows  []dashboardPanel `json:"rows"`
	}
	for key, text := range cm.Data {
		if err := json.Unmarshal([]byte(text), &board); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
	}
	var panels []dashboardPanel
	for _, row := range board.Rows {
		panels = append(panels, row.Panels...)
	}
	return cm, board.Title, panels
}

// TestDashboardIsTheConsoles checks what makes the console list and draw the dashboard: a ConfigMap
// in openshift-config-managed labelled console.openshift.io/dashboard=true, one key <name>.json
// holding Grafana JSON with a title and rows of panels of the types the console draws.
func TestDashboardIsTheConsoles(t *testing.T) {
	cm, title, panels := shippedDashboard(t)
	if cm.Namespace != dashboardNamespace || cm.Labels["console.openshift.io/dashboard"] != "true" {
		t.Errorf("ConfigMap %s/%s labels %v: the console reads dashboards labelled console.openshift.io/dashboard=true in %s", cm.Namespace, cm.Name, cm.Labels, dashboardNamespace)
	}
	for key := range cm.Data {
		if !strings.HasSuffix(key, ".json") {
			t.Errorf("key %s: want <name>.json", key)
		}
	}
	if title == "" || len(panels) == 0 {
		t.Fatalf("dashboard title %q with %d panels", title, len(panels))
	}
	drawn := []string{"graph", "singlestat", "table", "gauge", "grafana-piechart-panel"}
	ids := map[int]bool{}
	for _, p := range panels {
		if !slices.Contains(drawn, p.Type) {
			t.Errorf("panel %q: type %q, which the console does not draw (it draws %v)", p.Title, p.Type, drawn)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		if ids[p.ID] {
			t.Errorf("panel %q: id %d taken", p.Title, p.ID)
		}
		ids[p.ID] = true
	}
}

// TestDashboardQueriesNameServedMetrics parses every query of the dashboard with Prometheus's
// parser and checks that each metric it names is one the operator serves: its own metrics, by
// their descriptors, and those of controller-runtime's registry, which it serves beside them.
func TestDashboardQueriesNameServedMetrics(t *testing.T) {
	served := servedMetrics(t)
	_, _, panels := shippedDashboard(t)
	parser := promqlparser.NewParser(promqlparser.Options{})
	var queries int
	for _, p := range panels {
		for _, target := range p.Targets {
			queries++
			expr, err := parser.ParseExpr(target.Expr)
			if err != nil {
				t.Errorf("panel %q: %v", p.Title, err)
				continue
			}
			for _, name := range metricNames(expr) {
				if !served[name] {
					t.Errorf("panel %q names %s, which the operator does not serve", p.Title, name)
				}
			}
		}
	}
	if queries == 0 {
		t.Fatal("no queries")
	}
}

// TestDashboardDrawsEveryOperatorMetric checks that each of the operator's own metrics has a panel,
// so that a new one is not left off the dashboard.
func TestDashboardDrawsEveryOperatorMetric(t *testing.T) {
	_, _, panels := shippedDashboard(t)
	parser := promqlparser.NewParser(promqlparser.Options{})
	drawn := map[string]bool{}
	for _, p := range panels {
		for _, target := range p.Targets {
			if expr, err := parser.ParseExpr(target.Expr); err == nil {
				for _, name := range metricNames(expr) {
					drawn[strings.TrimSuffix(name, "_bucket")] = true
				}
			}
		}
	}
	for _, name := range operatorMetricNames(t) {
		if !drawn[name] {
			t.Errorf("%s has no panel", name)
		}
	}
}

// metricNames returns the metric names expr selects.
func metricNames(expr promqlparser.Expr) []string {
	var names []string
	promqlparser.Inspect(expr, func(node promqlparser.Node, _ []promqlparser.Node) error {
		vs, ok := node.(*promqlparser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == "__name__" {
				name = m.Value
			}
		}
		names = append(names, name)
		return nil
	})
	return names
}

// descName reads the metric name of a descriptor, which client_golang prints but does not export.
var descName = regexp.MustCompile(`fqName: "([^"]+)"`)

// operatorMetricNames are the names of the operator's own metrics, from the descriptors its
// collectors describe: every metric, whether or not it has a series yet.
func operatorMetricNames(t *testing.T) []string {
	t.Helper()
	descs := make(chan *prometheus.Desc)
	go func() {
		for _, c := range controllers.NewMetrics().Collectors() {
			c.Describe(descs)
		}
		close(descs)
	}()
	var names []string
	for d := range descs {
		m := descName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no name in descriptor %s", d)
		}
		names = append(names, m[1])
	}
	if len(names) == 0 {
		t.Fatal("the operator describes no metric")
	}
	return names
}

// servedMetrics returns the series names a scrape of the operator can show: each metric of the
// operator's own (a histogram as its _bucket, _sum and _count series) and each of
// controller-runtime's registry, which the operator serves its metrics on.
func servedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	served := map[string]bool{}
	for _, name := range operatorMetricNames(t) {
		served[name] = true
	}
	// The types, from a registry where each of the operator's metrics has a series.
	op := newOperator(t)
	held := with(machineSet, bootimage.Skip, bootimage.ReasonBootImageHeld, "Failed")
	op.decide(held)
	op.metrics.CountRestoreForTest(held)
	op.metrics.Observe("ec2:DescribeImages", time.Now(), nil)
	families, err := prometheus.Gatherers{op.registry, crmetrics.Registry}.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		// A histogram shows as its _bucket, _sum and _count series, never under its own name; a
		// summary as its quantiles under its name, and its _sum and _count.
		served[f.GetName()] = true
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			served[f.GetName()] = false
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				served[f.GetName()+suffix] = true
			}
		case dto.MetricType_SUMMARY:
			for _, suffix := range []string{"_sum", "_count"} {
				served[f.GetName()+suffix] = true
			}
		}
	}
	return served
}
