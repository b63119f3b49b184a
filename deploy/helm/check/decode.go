package check

import (
	"fmt"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Certificate is cert-manager.io/v1 Certificate, the fields the chart
// sets (cert-manager's own Go module is not taken in for them; the names
// and types are its API's). Decoding is strict, so a field the chart
// renders that is not here fails the check: add it only after checking
// cert-manager's API reference.
type Certificate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		SecretName  string   `json:"secretName"`
		Duration    string   `json:"duration,omitempty"`
		RenewBefore string   `json:"renewBefore,omitempty"`
		DNSNames    []string `json:"dnsNames,omitempty"`
		Usages      []string `json:"usages,omitempty"`
		IssuerRef   struct {
			Name  string `json:"name"`
			Kind  string `json:"kind,omitempty"`
			Group string `json:"group,omitempty"`
		} `json:"issuerRef"`
	} `json:"spec"`
}

// Object is one decoded manifest.
type Object struct {
	Kind, Name string
	Obj        any // *appsv1.StatefulSet, *corev1.Service, ...
}

// newObject is the typed object of an apiVersion and kind; an unknown one
// is an error (the chart renders nothing the check does not know).
func newObject(apiVersion, kind string) (any, error) {
	switch apiVersion + " " + kind {
	case "apps/v1 StatefulSet":
		return &appsv1.StatefulSet{}, nil
	case "apps/v1 DaemonSet":
		return &appsv1.DaemonSet{}, nil
	case "v1 Service":
		return &corev1.Service{}, nil
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}, nil
	case "v1 Secret":
		return &corev1.Secret{}, nil
	case "v1 ServiceAccount":
		return &corev1.ServiceAccount{}, nil
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, nil
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}, nil
	case "monitoring.coreos.com/v1 PrometheusRule":
		return &monitoringv1.PrometheusRule{}, nil
	case "cert-manager.io/v1 Certificate":
		return &Certificate{}, nil
	}
	return nil, fmt.Errorf("apiVersion %q kind %q: not a kind the chart check knows", apiVersion, kind)
}

// Decode decodes one manifest strictly into its typed object: unknown or
// duplicate fields and values of the wrong type are errors.
func Decode(doc string) (Object, error) {
	var tm struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
		return Object{}, err
	}
	obj, err := newObject(tm.APIVersion, tm.Kind)
	if err != nil {
		return Object{}, err
	}
	if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
		return Object{}, fmt.Errorf("%s %s: %w", tm.Kind, tm.Metadata.Name, err)
	}
	if tm.Metadata.Name == "" {
		return Object{}, fmt.Errorf("a %s without metadata.name", tm.Kind)
	}
	return Object{Kind: tm.Kind, Name: tm.Metadata.Name, Obj: obj}, nil
}
