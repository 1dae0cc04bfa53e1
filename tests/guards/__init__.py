"""Guards of the newer promises (issue 37): one file per package. A package, so that its test files
may share their basenames with those in tests/."""
