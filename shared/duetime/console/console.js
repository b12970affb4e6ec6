/* the console (issue 14): replaced by the front end */
