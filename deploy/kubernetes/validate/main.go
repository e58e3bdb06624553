// Command validate checks storpath's Kubernetes manifests offline.
//
//	validate build DIR        render the kustomization in DIR (kustomize's own library), print it
//	validate check FILE...    strictly decode every document of the given YAML files ("-": stdin)
//	validate kustomize DIR    build DIR and check the result (what `kubectl apply -k DIR` would send)
//
// Checking means: every document decodes into the typed Go structs of k8s.io/api or of the
// prometheus-operator API with unknown fields rejected, names are set, label selectors of
// DaemonSets, Services and ServiceMonitors select what they should, and named ports exist.
// Exit status 1 with one line per problem when anything is wrong.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// newObject returns an empty typed object for apiVersion/kind, or nil when the kind is unknown.
func newObject(apiVersion, kind string) any {
	switch apiVersion + "/" + kind {
	case "v1/Namespace":
		return &corev1.Namespace{}
	case "v1/Service":
		return &corev1.Service{}
	case "v1/ServiceAccount":
		return &corev1.ServiceAccount{}
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}
	case "v1/Secret":
		return &corev1.Secret{}
	case "apps/v1/DaemonSet":
		return &appsv1.DaemonSet{}
	case "rbac.authorization.k8s.io/v1/Role":
		return &rbacv1.Role{}
	case "rbac.authorization.k8s.io/v1/RoleBinding":
		return &rbacv1.RoleBinding{}
	case "monitoring.coreos.com/v1/ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}
	case "monitoring.coreos.com/v1/PodMonitor":
		return &monitoringv1.PodMonitor{}
	case "monitoring.coreos.com/v1/PrometheusRule":
		return &monitoringv1.PrometheusRule{}
	}
	return nil
}

type document struct {
	source string
	obj    any
	meta   *metav1.ObjectMeta
	kind   string
}

type checker struct {
	problems []string
	docs     []document
}

func (c *checker) problem(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// splitDocuments splits a YAML stream at "---" lines.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if strings.TrimRight(line, " \t\r\n") == "---" {
			docs = append(docs, append([]byte(nil), cur.Bytes()...))
			cur.Reset()
			continue
		}
		cur.WriteString(line)
	}
	return append(docs, cur.Bytes())
}

func (c *checker) decode(source string, data []byte) {
	for i, raw := range splitDocuments(data) {
		where := fmt.Sprintf("%s#%d", source, i+1)
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(raw, &head); err != nil {
			c.problem("%s: not YAML: %v", where, err)
			continue
		}
		if head.APIVersion == "" && head.Kind == "" {
			var anything any
			if yaml.Unmarshal(raw, &anything) == nil && anything == nil {
				continue // empty document
			}
			c.problem("%s: no apiVersion/kind", where)
			continue
		}
		obj := newObject(head.APIVersion, head.Kind)
		if obj == nil {
			c.problem("%s: unsupported kind %s %s", where, head.APIVersion, head.Kind)
			continue
		}
		// Duplicate keys, field names that differ from the API's only in case, and fields the
		// Go struct does not have are all errors (the API server's own strict decoding).
		if err := strictDecode(raw, obj); err != nil {
			c.problem("%s (%s): %v", where, head.Kind, err)
			continue
		}
		meta := objectMeta(obj)
		where = fmt.Sprintf("%s %s/%s", source, head.Kind, meta.Name)
		if meta.Name == "" {
			c.problem("%s: metadata.name is empty", where)
		}
		c.docs = append(c.docs, document{source: where, obj: obj, meta: meta, kind: head.Kind})
	}
}

func strictDecode(raw []byte, obj any) error {
	data, err := yaml.YAMLToJSONStrict(raw)
	if err != nil {
		return err
	}
	strictErrs, err := kjson.UnmarshalStrict(data, obj, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}

func objectMeta(obj any) *metav1.ObjectMeta {
	type hasMeta interface{ GetObjectMeta() metav1.Object }
	if m, ok := obj.(hasMeta); ok {
		if om, ok := m.GetObjectMeta().(*metav1.ObjectMeta); ok {
			return om
		}
	}
	return &metav1.ObjectMeta{}
}

func containerPorts(spec corev1.PodSpec) map[string]int32 {
	ports := map[string]int32{}
	for _, ctr := range spec.Containers {
		for _, p := range ctr.Ports {
			if p.Name != "" {
				ports[p.Name] = p.ContainerPort
			}
		}
	}
	return ports
}

// crossCheck verifies what a strict decode cannot: selectors, ports, references between objects.
func (c *checker) crossCheck() {
	var daemonSets []*appsv1.DaemonSet
	var services []*corev1.Service
	configMaps := map[string]bool{}
	serviceAccounts := map[string]bool{}
	for _, d := range c.docs {
		switch o := d.obj.(type) {
		case *appsv1.DaemonSet:
			daemonSets = append(daemonSets, o)
		case *corev1.Service:
			services = append(services, o)
		case *corev1.ConfigMap:
			configMaps[o.Namespace+"/"+o.Name] = true
		case *corev1.ServiceAccount:
			serviceAccounts[o.Namespace+"/"+o.Name] = true
		}
	}
	for _, ds := range daemonSets {
		where := "DaemonSet/" + ds.Name
		if ds.Spec.Selector == nil {
			c.problem("%s: spec.selector is required", where)
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
		if err != nil || sel.Empty() {
			c.problem("%s: bad or empty selector: %v", where, err)
		} else if !sel.Matches(labels.Set(ds.Spec.Template.Labels)) {
			c.problem("%s: selector %s does not match the pod template labels %v", where, sel, ds.Spec.Template.Labels)
		}
		if len(ds.Spec.Template.Spec.Containers) == 0 {
			c.problem("%s: no containers", where)
		}
		for _, ctr := range ds.Spec.Template.Spec.Containers {
			if ctr.Image == "" {
				c.problem("%s: container %s has no image", where, ctr.Name)
			}
		}
		if sa := ds.Spec.Template.Spec.ServiceAccountName; sa != "" && !serviceAccounts[ds.Namespace+"/"+sa] {
			c.problem("%s: service account %s is not among the manifests", where, sa)
		}
		mounts := map[string]bool{}
		for _, v := range ds.Spec.Template.Spec.Volumes {
			mounts[v.Name] = true
		}
		for _, ctr := range ds.Spec.Template.Spec.Containers {
			for _, m := range ctr.VolumeMounts {
				if !mounts[m.Name] {
					c.problem("%s: container %s mounts undefined volume %s", where, ctr.Name, m.Name)
				}
			}
		}
	}
	for _, svc := range services {
		where := "Service/" + svc.Name
		if len(svc.Spec.Selector) == 0 {
			continue
		}
		matched := false
		for _, ds := range daemonSets {
			if ds.Namespace == svc.Namespace && labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(ds.Spec.Template.Labels)) {
				matched = true
				ports := containerPorts(ds.Spec.Template.Spec)
				for _, p := range svc.Spec.Ports {
					if p.TargetPort.Type == 1 { // named port
						if _, ok := ports[p.TargetPort.StrVal]; !ok {
							c.problem("%s: targetPort %q is not a container port of DaemonSet/%s", where, p.TargetPort.StrVal, ds.Name)
						}
					}
				}
			}
		}
		if !matched {
			c.problem("%s: selector %v matches no pod template", where, svc.Spec.Selector)
		}
	}
	for _, d := range c.docs {
		switch o := d.obj.(type) {
		case *monitoringv1.ServiceMonitor:
			where := "ServiceMonitor/" + o.Name
			sel, err := metav1.LabelSelectorAsSelector(&o.Spec.Selector)
			if err != nil || sel.Empty() {
				c.problem("%s: bad or empty selector: %v", where, err)
				continue
			}
			var found *corev1.Service
			for _, svc := range services {
				if svc.Namespace == o.Namespace && sel.Matches(labels.Set(svc.Labels)) {
					found = svc
				}
			}
			if found == nil {
				c.problem("%s: selector %s matches no Service", where, sel)
				continue
			}
			portNames := map[string]bool{}
			for _, p := range found.Spec.Ports {
				portNames[p.Name] = true
			}
			for _, ep := range o.Spec.Endpoints {
				if ep.Port != "" && !portNames[ep.Port] {
					c.problem("%s: endpoint port %q is not a port of Service/%s", where, ep.Port, found.Name)
				}
			}
		case *monitoringv1.PrometheusRule:
			where := "PrometheusRule/" + o.Name
			for _, g := range o.Spec.Groups {
				for _, r := range g.Rules {
					if (r.Alert == "") == (r.Record == "") {
						c.problem("%s: group %s: a rule needs exactly one of alert and record", where, g.Name)
					}
					if r.Expr.String() == "" {
						c.problem("%s: group %s: rule %s%s has no expr", where, g.Name, r.Alert, r.Record)
					}
				}
			}
		}
	}
}

func build(dir string) ([]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, err
	}
	return res.AsYaml()
}

func report(c *checker) int {
	c.crossCheck()
	if len(c.problems) > 0 {
		for _, p := range c.problems {
			fmt.Fprintln(os.Stderr, p)
		}
		return 1
	}
	kinds := map[string]int{}
	for _, d := range c.docs {
		kinds[d.kind]++
	}
	var parts []string
	for k, n := range kinds {
		parts = append(parts, fmt.Sprintf("%d %s", n, k))
	}
	sort.Strings(parts)
	fmt.Fprintf(os.Stderr, "ok: %d objects (%s)\n", len(c.docs), strings.Join(parts, ", "))
	return 0
}

func run(args []string) (int, error) {
	if len(args) < 2 {
		return 2, errors.New("usage: validate build DIR | check FILE... | kustomize DIR")
	}
	c := &checker{}
	switch args[0] {
	case "build":
		out, err := build(args[1])
		if err != nil {
			return 1, err
		}
		_, err = os.Stdout.Write(out)
		return 0, err
	case "kustomize":
		out, err := build(args[1])
		if err != nil {
			return 1, err
		}
		c.decode("kustomize build "+args[1], out)
		return report(c), nil
	case "check":
		for _, f := range args[1:] {
			var data []byte
			var err error
			if f == "-" {
				data, err = io.ReadAll(os.Stdin)
			} else {
				data, err = os.ReadFile(f)
			}
			if err != nil {
				return 1, err
			}
			c.decode(f, data)
		}
		return report(c), nil
	}
	return 2, fmt.Errorf("unknown command %q", args[0])
}

func main() {
	code, err := run(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "validate:", err)
	}
	os.Exit(code)
}
