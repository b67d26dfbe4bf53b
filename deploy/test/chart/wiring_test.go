package chart

import (
	"maps"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// checkWiring checks that the objects find one another as a cluster
// would: selectors that select the pods, ports named as the container
// names them, the autoscaler's target, the scrape's port and path.
func checkWiring(t *testing.T, o objects) {
	t.Helper()
	pod := labels.Set(o.deployment.Spec.Template.Labels)
	selects := func(what string, sel *metav1.LabelSelector) {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil || sel == nil || s.Empty() || !s.Matches(pod) {
			t.Errorf("%s's selector %v does not select the pods %v (%v)", what, sel, pod, err)
		}
	}
	selects("the Deployment", o.deployment.Spec.Selector)
	if s := labels.SelectorFromSet(o.service.Spec.Selector); len(o.service.Spec.Selector) == 0 || !s.Matches(pod) {
		t.Errorf("the Service's selector %v does not select the pods %v", o.service.Spec.Selector, pod)
	}
	c := o.container(t)
	named := map[string]int32{}
	for _, p := range c.Ports {
		named[p.Name] = p.ContainerPort
	}
	servicePorts := map[string]bool{}
	for _, p := range o.service.Spec.Ports {
		servicePorts[p.Name] = true
		if _, ok := named[p.TargetPort.StrVal]; p.TargetPort.Type != intstr.String || !ok {
			t.Errorf("Service port %s targets %v, no port of the container %v", p.Name, p.TargetPort, slices.Sorted(maps.Keys(named)))
		}
		if p.Name == "grpc" && (p.AppProtocol == nil || *p.AppProtocol != "grpc") {
			t.Errorf("Service port grpc has appProtocol %v, want grpc (meshes then route HTTP/2)", p.AppProtocol)
		}
		if p.Port != named[p.Name] {
			t.Errorf("Service port %s is %d, the container's %d", p.Name, p.Port, named[p.Name])
		}
	}
	for _, tsc := range o.deployment.Spec.Template.Spec.TopologySpreadConstraints {
		selects("a topology spread constraint", tsc.LabelSelector)
	}
	if o.hpa != nil {
		if r := o.hpa.Spec.ScaleTargetRef; r.Kind != "Deployment" || r.Name != o.deployment.Name || r.APIVersion != "apps/v1" {
			t.Errorf("the autoscaler scales %+v, not the Deployment %s", r, o.deployment.Name)
		}
		if o.deployment.Spec.Replicas != nil {
			t.Errorf("the Deployment sets replicas %d beside the autoscaler, which a helm upgrade would then reset", *o.deployment.Spec.Replicas)
		}
	}
	if o.pdb != nil {
		selects("the PodDisruptionBudget", o.pdb.Spec.Selector)
	}
	if o.networkPolicy != nil {
		selects("the NetworkPolicy", &o.networkPolicy.Spec.PodSelector)
		for _, r := range o.networkPolicy.Spec.Ingress {
			for _, p := range r.Ports {
				if _, ok := named[p.Port.StrVal]; p.Port == nil || !ok {
					t.Errorf("the NetworkPolicy admits port %v, no port of the container", p.Port)
				}
			}
		}
	}
	if m := o.serviceMonitor; m != nil {
		if s := labels.SelectorFromSet(m.Spec.Selector.MatchLabels); !s.Matches(labels.Set(o.service.Labels)) {
			t.Errorf("the ServiceMonitor's selector %v does not select the Service %v", m.Spec.Selector.MatchLabels, o.service.Labels)
		}
		for _, e := range m.Spec.Endpoints {
			if !servicePorts[e.Port] || e.Port != "http" || e.Path != "/metrics" {
				t.Errorf("the ServiceMonitor scrapes %q %q, not the Service's http port's /metrics", e.Port, e.Path)
			}
		}
	}
}
