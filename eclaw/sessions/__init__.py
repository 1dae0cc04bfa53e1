"""Cookies, credentials and sessions: the crawl's cookie jars (one per ``meta["cookiejar"]``),
basic auth per host, what each hop of a request carries, and the session pool."""
