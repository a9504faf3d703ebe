"""`choir.web.browse` on choird's Chromium worker (issue 18): the worker, its actions and rules."""
