package gateway_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/fedgate/fedgate/backend"
	"github.com/fedgate/fedgate/gateway/gatewaytest"
)

// The console's sessions live on the server: a cookie copied before its
// session ended is refused afterwards, whoever sends it.

// consoleCookie returns the session cookie c holds.
func (e *consoleEnv) consoleCookie(c *http.Client) string {
	e.t.Helper()
	u, _ := url.Parse(e.url + "/_fedgate/ui/")
	for _, k := range c.Jar.Cookies(u) {
		if k.Name == "fedgate_console" && k.Value != "" {
			return k.Value
		}
	}
	e.t.Fatal("the browser holds no console session cookie")
	return ""
}

// replay GETs the overview with only the given cookie value, as a copy of
// the cookie would be sent from anywhere.
func (e *consoleEnv) replay(value string) *http.Response {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.url+"/_fedgate/ui/", nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.AddCookie(&http.Cookie{Name: "fedgate_console", Value: value})
	resp, _ := e.do(e.browser(), req)
	return resp
}

func wantSessionOK(t *testing.T, resp *http.Response, what string) {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d to %q, want 200 (a live session)", what, resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestConsoleSignOutEndsSessionOnServer(t *testing.T) {
	e := newConsoleEnv(t)
	c := e.signedIn(gatewaytest.RootAccessKey, gatewaytest.RootSecretKey)
	other := e.signedIn(gatewaytest.RootAccessKey, gatewaytest.RootSecretKey)
	old := e.consoleCookie(c)
	wantSessionOK(t, e.replay(old), "the copied cookie before sign-out")

	resp, _ := e.post(c, "/_fedgate/ui/logout", nil)
	wantRedirectToLogin(t, resp, "POST logout")
	wantRedirectToLogin(t, e.replay(old), "the copied cookie after sign-out")
	// Signing out again with it changes nothing, and the same user's
	// other session (another browser) goes on.
	req, _ := http.NewRequest(http.MethodPost, e.url+"/_fedgate/ui/logout", nil)
	req.AddCookie(&http.Cookie{Name: "fedgate_console", Value: old})
	resp, _ = e.do(e.browser(), req)
	wantRedirectToLogin(t, resp, "POST logout with the old cookie")
	e.overview(other)
}

func TestConsoleUserRemovalEndsSession(t *testing.T) {
	e := newConsoleEnv(t)
	e.grant("alice", "ckpt")
	ac := e.signedIn("ALICEKEY", "alice-secret")
	old := e.consoleCookie(ac)
	wantSessionOK(t, e.replay(old), "alice's cookie")
	noErr(t, e.fake.Users().Remove(context.Background(), "alice"))
	wantRedirectToLogin(t, e.replay(old), "alice's cookie after she was removed")
	// The session stays ended when a user with the same keys comes back.
	e.fake.AddUser("alice", "ALICEKEY", "alice-secret")
	e.grant("alice", "ckpt")
	wantRedirectToLogin(t, e.replay(old), "alice's cookie after she was added again")
}

func TestConsoleKeyRotationEndsSession(t *testing.T) {
	e := newConsoleEnv(t)
	e.grant("alice", "ckpt")
	c := e.signedIn("ALICEKEY", "alice-secret")
	old := e.consoleCookie(c)
	wantSessionOK(t, e.replay(old), "alice's cookie")
	// A new secret under the same access key.
	e.fake.AddUser("alice", "ALICEKEY", "a-rotated-secret")
	e.grant("alice", "ckpt")
	wantRedirectToLogin(t, e.replay(old), "alice's cookie after her secret changed")
	c = e.signedIn("ALICEKEY", "a-rotated-secret")
	old = e.consoleCookie(c)
	wantSessionOK(t, e.replay(old), "alice's cookie with the new secret")

	// A new access key: the session of the old one ends.
	noErr(t, e.fake.Users().Remove(context.Background(), "alice"))
	e.fake.AddUser("alice", "ALICEKEY2", "alice-secret-2")
	e.grant("alice", "ckpt")
	wantRedirectToLogin(t, e.replay(old), "alice's cookie after her key was replaced")
	e.signedIn("ALICEKEY2", "alice-secret-2")
}

// The sessions a node keeps are bounded: past the most one access key may
// hold, its oldest session ends, and another user's sessions are kept.
func TestConsoleSessionsBounded(t *testing.T) {
	e := newConsoleEnv(t)
	e.grant("alice", "ckpt")
	alice := e.consoleCookie(e.signedIn("ALICEKEY", "alice-secret"))
	first := e.consoleCookie(e.signedIn(gatewaytest.RootAccessKey, gatewaytest.RootSecretKey))
	second := e.consoleCookie(e.signedIn(gatewaytest.RootAccessKey, gatewaytest.RootSecretKey))
	last := second
	for range 31 {
		last = e.consoleCookie(e.signedIn(gatewaytest.RootAccessKey, gatewaytest.RootSecretKey))
	}
	wantRedirectToLogin(t, e.replay(first), "root's oldest session after 33 sign-ins")
	wantSessionOK(t, e.replay(second), "root's second session")
	wantSessionOK(t, e.replay(last), "root's newest session")
	wantSessionOK(t, e.replay(alice), "alice's session")
}

// grant gives user read on bucket in the console's fake.
func (e *consoleEnv) grant(user, bucket string) {
	e.t.Helper()
	noErr(e.t, e.fake.Users().Grant(context.Background(), backend.User{Name: backend.RootUser, Root: true}, user, bucket, "read"))
}
