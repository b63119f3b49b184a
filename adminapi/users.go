package adminapi

// User is one user as the admin API lists it.
type User struct {
	Name      string            `json:"name"`
	AccessKey string            `json:"access_key"`
	Root      bool              `json:"root,omitempty"`
	Created   string            `json:"created"`
	Grants    map[string]string `json:"grants,omitempty"`
}

// AddUser is the body of POST /_fedgate/admin/users.
type AddUser struct {
	Name      string `json:"name"`
	AccessKey string `json:"access_key,omitempty"`
	SecretKey string `json:"secret_key,omitempty"`
}

// Grant is the body of POST /_fedgate/admin/users/{name}/grants.
type Grant struct {
	Bucket string `json:"bucket"`
	Perm   string `json:"perm"`
}

// Error is every admin API error body.
type Error struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}
