package federation

// SetLifecycleHook installs a function the lifecycle runner calls between
// looking at an object it is about to expire and deleting it.
func (n *Namespace) SetLifecycleHook(f func(bucket, key string)) { n.lcHook = f }
