"""`choirctl session|chat|inbox|approval|logs`: sessions and what waits on them."""
