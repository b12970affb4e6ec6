"""What runs in the api function: the REST API, its validation and isolation per team, the operator's side of
teams, the authorizer and the web console."""
