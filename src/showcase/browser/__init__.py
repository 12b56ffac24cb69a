"""Real Chromium through Playwright: launch, the offline CDN, one page served from a virtual origin."""
