export default function Home() {
  return <p>streamlab: /v1/* goes to the model server</p>;
}
