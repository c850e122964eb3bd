// The front end webpack-dev-server compiles and serves in development; the API calls it proxies
// to the model server are what the labs measure.
document.title = "streamlab";
